#include "server/server_main.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/notification.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "flashserve/version.h"
#include "server/api/server.h"

ABSL_FLAG(std::string, model, "", "Path of the GGUF model file (required)");
ABSL_FLAG(std::string, device, "auto",
          "auto | cpu | cuda ('auto' = the GPU when one is visible and supports the model)");
ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on (gRPC, HTTP and metrics)");
ABSL_FLAG(int, port, 50051, "gRPC port (0 = any free port, printed at start-up)");
ABSL_FLAG(int, metrics_port, 9464,
          "Prometheus /metrics HTTP port (0 = any free port, -1 = disabled)");
ABSL_FLAG(int, http_port, 8000,
          "OpenAI-compatible HTTP API port: /v1/completions, /v1/chat/completions, /v1/models, "
          "/health, /ready (0 = any free port, -1 = disabled)");
ABSL_FLAG(std::string, log_format, "text",
          "text | json: the format of the log lines on stderr (json: one object per line)");
ABSL_FLAG(std::string, model_name, "",
          "The model label of every metric (default: the model file name without .gguf)");
ABSL_FLAG(int, max_num_seqs, 64, "Sequences batched together per engine step");
ABSL_FLAG(int, max_batch_tokens, 0,
          "Tokens (prefill chunks + decodes) per engine step; 0 = the backend's default (8192 "
          "on an H100 or H200, 2048 on other GPUs and the CPU)");
ABSL_FLAG(int, max_waiting, 256,
          "Requests that may wait for admission; beyond it RESOURCE_EXHAUSTED at once");
ABSL_FLAG(int, max_context, 0, "Cap on tokens per sequence (0 = the model's context length)");
ABSL_FLAG(int, kv_cache_mb, 0,
          "KV cache size in MiB (0 = the model loader's default)");
ABSL_FLAG(int64_t, kv_cache_tokens, 0,
          "KV cache size in tokens (overrides --kv_cache_mb; 0 = the backend's default)");
ABSL_FLAG(double, gpu_memory_fraction, 0.9,
          "CUDA backend: fraction of the GPU's memory that weights, workspace and KV cache may "
          "fill (the KV cache takes what is left after the weights)");
ABSL_FLAG(bool, cuda_graphs, true,
          "CUDA backend: replay decode steps from CUDA graphs (--nocuda_graphs: launch the same "
          "kernels one by one, for comparison; results are identical)");
ABSL_FLAG(std::string, weights, "auto",
          "CUDA backend: native (quantized matrices stay in their GGUF block format: Q8_0, Q4_0, "
          "Q4_1, Q4_K, Q5_K, Q6_K; ~0.3x bf16's memory, fastest up to ~64 streams) | bf16 (every "
          "matrix dequantized to bf16 at load; a few % faster at 256 streams on 1B-8B models) | "
          "auto (= native)");
ABSL_FLAG(bool, prefix_caching, true,
          "Reuse the KV cache blocks of prompt prefixes seen before (--noprefix_caching: off)");
ABSL_FLAG(int, threads, 0, "CPU backend threads of a step (0 = every core)");
ABSL_FLAG(double, drain_timeout, 30,
          "Shutdown: seconds admitted requests may take to finish; then what remains fails "
          "with UNAVAILABLE and the process exits");
ABSL_FLAG(double, stall_timeout, 30,
          "Seconds without a finished engine step (with work pending) before health turns "
          "NOT_SERVING");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain for gRPC TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle; when set, clients must present a certificate it signed (mTLS)");
ABSL_FLAG(std::string, auth_token_file, "",
          "File with accepted bearer tokens, one per line ('#' comments); re-read on SIGHUP");
ABSL_FLAG(bool, auth_open_health, true, "With token auth: health answers without a token");
ABSL_FLAG(bool, auth_open_reflection, false,
          "With token auth: server reflection answers without a token");

namespace flashserve::server {
namespace {

// model/ names option fields in its messages; this names the flags that set them.
constexpr std::pair<const char*, const char*> kFieldFlags[] = {
    {"kv_cache_mb", "--kv-cache-mb"},
    {"kv_cache_tokens", "--kv-cache-tokens"},
    {"gpu_memory_fraction", "--gpu-memory-fraction"},
    {"max_num_seqs", "--max-num-seqs"},
    {"max_batch_tokens", "--max-batch-tokens"},
    {"device", "--device"},
    {"weights", "--weights"}};

// Fields that are plain words ("device", "weights": "the fp32 weights") name their flag only
// at the start of a message; identifiers ("kv_cache_mb") wherever they stand.
bool is_identifier(std::string_view field) { return field.find('_') != std::string_view::npos; }

// A message of model/ about option fields as one about the flags that set them: "device
// cuda: ..." -> "--device cuda: ...", "KV cache: kv_cache_mb 30000 asks ..." -> "KV cache:
// --kv-cache-mb 30000 asks ...".
absl::Status as_flag_error(const absl::Status& status) {
  std::string message(status.message());
  for (const auto& [field, flag] : kFieldFlags) {
    if (is_identifier(field)) {
      message = absl::StrReplaceAll(message, {{field, flag}});
    } else if (absl::StartsWith(message, field)) {
      message = absl::StrCat(flag, message.substr(std::string_view(field).size()));
    }
  }
  return absl::Status(status.code(), message);
}

// True when an as_flag_error() message names one of the flags.
bool names_a_flag(const absl::Status& status) {
  for (const auto& [field, flag] : kFieldFlags) {
    if (absl::StrContains(status.message(), flag)) return true;
  }
  return false;
}

using api::Server;
using api::ServerOptions;

// How long past --drain-timeout a shutdown may take (a step in progress, writing out the final
// statuses) before the process exits without waiting any longer.
constexpr std::chrono::seconds kShutdownSlack{10};

// The process's log: text until the flags are parsed, then as --log-format says.
const api::Logger* g_logger = &api::default_logger();

void log(const std::string& line) { g_logger->info(line); }
void log_error(const std::string& line) { g_logger->error(line); }

// Points g_logger at a logger of the --log-format format; false (logged) on a bad value.
bool configure_logger() {
  const auto format = api::parse_log_format(absl::GetFlag(FLAGS_log_format));
  if (!format.ok()) {
    log_error(std::string(format.status().message()));
    return false;
  }
  static const api::Logger logger(*format);
  g_logger = &logger;
  return true;
}

// ---- signals: the handler only writes the signal number to a pipe --------------------------

int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_num_stop_signals{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_signal(int signal) {
  if (signal != SIGHUP && g_num_stop_signals.fetch_add(1) > 0) {
    // A plain line even under --log-format json: a signal handler may not take the logger's
    // lock (nor allocate), so it writes these fixed bytes itself.
    constexpr char kMessage[] = "flashserve: second signal, exiting without draining\n";
    (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    _exit(128 + signal);
  }
  const char byte = static_cast<char>(signal);
  (void)!write(g_signal_pipe[1], &byte, 1);
}

// Signal handlers, not sigwait: threads that exist before main() (the BLAS thread pool) do
// not block signals, so a blocked-signal scheme would let SIGTERM kill the process.
bool install_signal_handlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return false;
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
  return true;
}

// The first reason to stop wins: a signal or a failed model load.
class StopRequest {
 public:
  void request(const std::string& why, int exit_code) {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.HasBeenNotified()) return;
    if (exit_code == 0) {
      log(why);
    } else {
      log_error(why);
    }
    exit_code_ = exit_code;
    done_.Notify();
  }
  int wait() {
    done_.WaitForNotification();
    std::lock_guard<std::mutex> lock(mu_);
    return exit_code_;
  }

 private:
  std::mutex mu_;
  absl::Notification done_;
  int exit_code_ = 0;
};

// Reads the signal pipe until it is closed: SIGHUP reloads the tokens, SIGINT/SIGTERM stop.
std::thread start_signal_thread(Server* server, StopRequest* stop) {
  return std::thread([server, stop] {
    char byte;
    for (;;) {
      const ssize_t n = read(g_signal_pipe[0], &byte, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || byte == 0) return;
      if (byte == SIGHUP) {
        const absl::Status status = server->reload_auth_tokens();
        log(status.ok() ? "SIGHUP: auth tokens reloaded"
                        : absl::StrCat("SIGHUP: auth tokens NOT reloaded (the old ones stay): ",
                                       status.ToString()));
        continue;
      }
      stop->request(absl::StrCat("received ", strsignal(byte), ": draining"), 0);
    }
  });
}

// ---- flags -----------------------------------------------------------------------------------

void parse_flags(int argc, char** argv, const ServerBinary& binary) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [flags_file = binary.flags_file](absl::string_view file) {
    return absl::EndsWith(file, "server/server_main.cc") ||
           (!flags_file.empty() && !file.empty() && absl::EndsWith(flags_file, file));
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [name = binary.name] {
    return absl::StrCat(name, " ", kVersion, " (commit ", kGitCommit, ")\n");
  };
  absl::SetFlagsUsageConfig(usage);
  parse_command_line(argc, argv, binary.usage);
}

absl::StatusOr<ServerOptions> options_from_flags() {
  ServerOptions o;
  o.model_path = absl::GetFlag(FLAGS_model);
  o.model_name = absl::GetFlag(FLAGS_model_name);
  o.device = absl::GetFlag(FLAGS_device);
  o.host = absl::GetFlag(FLAGS_host);
  o.port = absl::GetFlag(FLAGS_port);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.http_port = absl::GetFlag(FLAGS_http_port);
  o.engine.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  o.engine.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  o.engine.prefix_caching = absl::GetFlag(FLAGS_prefix_caching);
  o.engine.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  o.engine.max_context = absl::GetFlag(FLAGS_max_context);
  o.kv_cache_mb = absl::GetFlag(FLAGS_kv_cache_mb);
  o.kv_cache_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
  o.gpu_memory_fraction = absl::GetFlag(FLAGS_gpu_memory_fraction);
  o.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  o.weights = absl::GetFlag(FLAGS_weights);
  o.num_threads = absl::GetFlag(FLAGS_threads);
  o.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
           absl::GetFlag(FLAGS_tls_client_ca)};
  o.auth = {absl::GetFlag(FLAGS_auth_token_file), absl::GetFlag(FLAGS_auth_open_health),
            absl::GetFlag(FLAGS_auth_open_reflection)};
  ASSIGN_OR_RETURN(o.drain_timeout, api::seconds_flag(
                                        "drain-timeout", absl::GetFlag(FLAGS_drain_timeout)));
  ASSIGN_OR_RETURN(o.engine.stall_threshold,
                   api::seconds_flag("stall-timeout",
                                                 absl::GetFlag(FLAGS_stall_timeout)));
  RETURN_IF_ERROR(api::validate_server_options(o));
  absl::StatusOr<model::Device> device = model::parse_device(o.device);
  if (!device.ok()) return as_flag_error(device.status());
  RETURN_IF_ERROR(as_flag_error(model::check_device_available(*device)));
  return o;
}

// ---- life cycle ------------------------------------------------------------------------------

// Null when the server cannot start, with *exit_code 2 when a flag's file is wrong (a key
// that does not match the certificate, a token file without tokens: InvalidArgument) and 1
// otherwise (the port cannot be bound).
std::unique_ptr<Server> start_server(const ServerOptions& options, int* exit_code) {
  auto server = Server::start(options);
  if (!server.ok()) {
    log_error(absl::StrCat("cannot start: ", server.status().ToString()));
    *exit_code = server.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    return nullptr;
  }
  // Tests and tools parse this line: keep "listening on HOST:PORT (gRPC)" (IPv6 in brackets).
  const std::string host =
      absl::StrContains(options.host, ':') ? absl::StrCat("[", options.host, "]") : options.host;
  log(absl::StrCat("listening on ", host, ":", (*server)->grpc_port(), " (gRPC)"));
  log(absl::StrCat("gRPC security: ",
                   options.tls.cert_path.empty() ? "plaintext" : "TLS",
                   options.tls.client_ca_path.empty() ? "" : " + client certificates (mTLS)",
                   options.auth.token_file.empty() ? ", no token auth" : ", bearer tokens"));
  if ((*server)->http_port() > 0) {
    // Tests and tools parse this line too: keep "listening on HOST:PORT (HTTP)".
    log(absl::StrCat("listening on ", options.host, ":", (*server)->http_port(), " (HTTP",
                     options.tls.cert_path.empty() ? "" : "S", ")"));
  }
  if ((*server)->metrics_port() > 0) {
    log(absl::StrCat("metrics on http://", host, ":", (*server)->metrics_port(),
                     "/metrics"));
  }
  return std::move(*server);
}

// The model source, with an allocation that fails while loading as an error status: an
// exception must not end the process from the loader thread.
absl::StatusOr<model::LoadedModel> load_guarded(const ModelSource& source,
                                                const ServerOptions& options) {
  try {
    return source(options);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of memory while loading the model (no budget check caught it: please report)");
  }
}

std::thread start_loader(Server* server, const ServerOptions& options, const ModelSource& source,
                         StopRequest* stop) {
  log(absl::StrCat("loading ", options.model_path, " ..."));
  return std::thread([server, &options, &source, stop] {
    absl::StatusOr<model::LoadedModel> model = load_guarded(source, options);
    if (!model.ok()) {
      // A budget or choice that the flags set (the KV cache past the memory available) is a
      // usage error like a bad flag: exit code 2; anything else (the file) 1.
      const absl::Status error = as_flag_error(model.status());
      stop->request(absl::StrCat("cannot load the model: ", error.ToString()),
                    names_a_flag(error) ? 2 : 1);
      return;
    }
    server->serve(std::move(*model));
    log(absl::StrCat("model loaded: ", server->model_summary()));
    log("serving");
  });
}

// Exits the process if the shutdown outlives the drain limit plus kShutdownSlack (a runner
// stuck in a step, a load that does not end).
std::thread start_watchdog(std::chrono::milliseconds drain_timeout, absl::Notification* done) {
  return std::thread([drain_timeout, done] {
    if (done->WaitForNotificationWithTimeout(absl::FromChrono(drain_timeout + kShutdownSlack))) {
      return;
    }
    log(absl::StrCat("shutdown did not finish within --drain-timeout + ", kShutdownSlack.count(),
                     " s; exiting without waiting"));
    _exit(1);
  });
}

}  // namespace

absl::StatusOr<model::LoadedModel> load_model_file(const api::ServerOptions& options) {
  ASSIGN_OR_RETURN(const model::LoadOptions load, api::load_options(options));
  return model::load_model(options.model_path, load);
}

int run_server(int argc, char** argv, const ServerBinary& binary) {
  parse_flags(argc, argv, binary);
  if (!configure_logger()) return 2;
  absl::StatusOr<ServerOptions> options = options_from_flags();
  if (!options.ok()) {
    log_error(std::string(options.status().message()));
    return 2;
  }
  options->logger = g_logger;
  if (!install_signal_handlers()) {
    log_error(absl::StrCat("cannot create the signal pipe: ", std::strerror(errno)));
    return 1;
  }
  int start_error = 0;
  std::unique_ptr<Server> server = start_server(*options, &start_error);
  if (server == nullptr) return start_error;
  StopRequest stop;
  std::thread signals = start_signal_thread(server.get(), &stop);
  std::thread loader = start_loader(server.get(), *options, binary.load_model, &stop);

  const int exit_code = stop.wait();
  absl::Notification stopped;
  std::thread watchdog = start_watchdog(options->drain_timeout, &stopped);
  loader.join();  // a load in progress completes before the engine can drain
  server->shutdown();
  stopped.Notify();
  watchdog.join();
  const char end = 0;  // ends the signal thread
  (void)!write(g_signal_pipe[1], &end, 1);
  signals.join();
  log("stopped");
  return exit_code;
}

}  // namespace flashserve::server
