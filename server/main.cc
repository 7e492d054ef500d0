// flashserve: the gRPC LLM server (contract in docs/design.md).
//
//   flashserve --model PATH [--device auto|cpu|cuda] [--host 0.0.0.0] [--port 50051]
//              [--metrics-port 9464] [--model-name NAME] [limits...]
//   flashserve --version
//
// Start-up: the gRPC and metrics ports are bound first (health NOT_SERVING, Generation
// UNAVAILABLE), then the model loads on a separate thread; health turns SERVING once the
// engine runs. SIGINT/SIGTERM: NOT_SERVING, drain the engine (admitted requests finish), shut
// the server down (a second signal exits at once). Logs go to stderr, as text or JSON
// (--log-format), with one access line per generation call.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "flashserve/version.h"
#include "model/model_loader.h"
#include "server/api/server.h"

ABSL_FLAG(std::string, model, "", "Path of the GGUF model file (required)");
ABSL_FLAG(std::string, device, "auto",
          "auto | cpu | cuda ('auto' = the GPU when one is visible and supports the model)");
ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on (gRPC and metrics)");
ABSL_FLAG(int, port, 50051, "gRPC port (0 = any free port, printed at start-up)");
ABSL_FLAG(int, metrics_port, 9464,
          "Prometheus /metrics HTTP port (0 = any free port, -1 = disabled)");
ABSL_FLAG(std::string, log_format, "text",
          "text | json: the format of the log lines on stderr (json: one object per line)");
ABSL_FLAG(std::string, model_name, "",
          "The model label of every metric (default: the model file name without .gguf)");
ABSL_FLAG(int, max_num_seqs, 64, "Sequences batched together per engine step");
ABSL_FLAG(int, max_batch_tokens, 2048, "Tokens (prefill chunks + decodes) per engine step");
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
ABSL_FLAG(int, threads, 0, "CPU backend threads (0 = the BLAS default)");
ABSL_FLAG(double, drain_timeout, 30,
          "Seconds in-flight calls may take to finish after the engine drained on shutdown");

namespace {

// The first SIGINT/SIGTERM asks main() to drain; a second one exits at once.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_signal(int signal) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, signal)) {
    constexpr char kMessage[] = "flashserve: second signal, exiting without draining\n";
    (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    _exit(128 + signal);
  }
}

// The process's log: text until the flags are parsed, then as --log-format says.
const flashserve::api::Logger g_text_logger;
const flashserve::api::Logger* g_logger = &g_text_logger;

void log(const std::string& line) { g_logger->info(line); }
void log_error(const std::string& line) { g_logger->error(line); }

// Points g_logger at a logger of the --log-format format; false (logged) on a bad value.
bool configure_logger() {
  const auto format = flashserve::api::parse_log_format(absl::GetFlag(FLAGS_log_format));
  if (!format.ok()) {
    log_error(std::string(format.status().message()));
    return false;
  }
  static const flashserve::api::Logger logger(*format);
  g_logger = &logger;
  return true;
}

flashserve::api::ServerOptions options_from_flags() {
  flashserve::api::ServerOptions o;
  o.model_path = absl::GetFlag(FLAGS_model);
  o.model_name = absl::GetFlag(FLAGS_model_name);
  o.device = absl::GetFlag(FLAGS_device);
  o.host = absl::GetFlag(FLAGS_host);
  o.port = absl::GetFlag(FLAGS_port);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.engine.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  o.engine.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  o.engine.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  o.engine.max_context = absl::GetFlag(FLAGS_max_context);
  o.kv_cache_mb = absl::GetFlag(FLAGS_kv_cache_mb);
  o.kv_cache_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
  o.gpu_memory_fraction = absl::GetFlag(FLAGS_gpu_memory_fraction);
  o.num_threads = absl::GetFlag(FLAGS_threads);
  return o;
}

// Flag values that can be rejected before anything starts. Empty when fine.
std::string check_options(const flashserve::api::ServerOptions& o) {
  if (o.model_path.empty()) return "--model is required";
  if (o.port < 0 || o.port > 65535) return absl::StrCat("--port ", o.port, " is not a port");
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return absl::StrCat("--metrics_port ", o.metrics_port, " is not a port (or -1)");
  }
  if (o.engine.max_num_seqs < 1) return "--max_num_seqs must be >= 1";
  if (o.engine.max_batch_tokens < 1) return "--max_batch_tokens must be >= 1";
  if (o.engine.max_waiting < 0) return "--max_waiting must be >= 0";
  if (o.engine.max_context < 0) return "--max_context must be >= 0";
  if (o.kv_cache_mb < 0) return "--kv_cache_mb must be >= 0";
  if (o.kv_cache_tokens < 0) return "--kv_cache_tokens must be >= 0";
  if (!(o.gpu_memory_fraction > 0 && o.gpu_memory_fraction <= 1)) {
    return absl::StrCat("--gpu_memory_fraction ", o.gpu_memory_fraction, " must be in (0, 1]");
  }
  if (o.num_threads < 0) return "--threads must be >= 0";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "flashserve --model PATH [--device auto|cpu|cuda] [--host 0.0.0.0] [--port 50051] "
      "[--metrics-port 9464] [--model-name NAME] [--log-format text|json] [--max-num-seqs N] "
      "[--max-batch-tokens N] [--max-waiting N] [--kv-cache-mb MB] [--threads N]");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "server/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] {
    return absl::StrCat("flashserve ", flashserve::kVersion, " (commit ",
                        flashserve::kGitCommit, ")\n");
  };
  absl::SetFlagsUsageConfig(usage);
  // docs/api.md spells flags with dashes (--metrics-port); absl flags use underscores.
  std::vector<std::string> args(argv, argv + argc);
  std::vector<char*> fixed;
  for (std::string& a : args) {
    if (a.rfind("--", 0) == 0) {
      const size_t end = std::min(a.find('='), a.size());
      for (size_t i = 2; i < end; ++i) {
        if (a[i] == '-') a[i] = '_';
      }
    }
    fixed.push_back(a.data());
  }
  absl::ParseCommandLine(static_cast<int>(fixed.size()), fixed.data());
  if (!configure_logger()) return 2;
  flashserve::api::ServerOptions options = options_from_flags();
  options.logger = g_logger;
  if (std::string problem = check_options(options); !problem.empty()) {
    log_error(problem);
    return 2;
  }
  if (auto device = flashserve::model::parse_device(options.device); !device.ok()) {
    log_error(std::string(device.status().message()));
    return 2;
  } else if (absl::Status st = flashserve::model::check_device_available(*device); !st.ok()) {
    log_error(std::string(st.message()));
    return 2;
  }

  // Signal handlers, not sigwait: threads that exist before main() (the BLAS thread pool)
  // do not block signals, so a blocked-signal scheme would let SIGTERM kill the process.
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  auto server = flashserve::api::Server::start(options);
  if (!server.ok()) {
    log_error(absl::StrCat("cannot start: ", server.status().ToString()));
    return 1;
  }
  log(absl::StrCat("listening on ", options.host, ":", (*server)->grpc_port(), " (gRPC)"));
  if ((*server)->metrics_port() > 0) {
    log(absl::StrCat("metrics on http://", options.host, ":", (*server)->metrics_port(),
                     "/metrics"));
  }
  log(absl::StrCat("loading ", options.model_path, " ..."));

  std::atomic<int> load_state{0};  // 0 loading, 1 loaded, -1 failed
  std::thread loader([&] {
    absl::Status status = (*server)->load_model();
    if (status.ok()) {
      log(absl::StrCat("model loaded: ", (*server)->model_summary()));
      log("serving");
      load_state.store(1);
    } else {
      log_error(absl::StrCat("cannot load the model: ", status.ToString()));
      load_state.store(-1);
    }
  });

  int exit_code = 0;
  while (true) {
    if (const int signal = g_signal.load(); signal != 0) {
      log(absl::StrCat("received ", strsignal(signal), ": draining"));
      break;
    }
    if (load_state.load() < 0) {
      exit_code = 1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  loader.join();  // a load in progress completes before the engine can drain
  const auto grace = std::chrono::milliseconds(
      static_cast<int64_t>(absl::GetFlag(FLAGS_drain_timeout) * 1000));
  (*server)->shutdown(grace);
  log("stopped");
  return exit_code;
}
