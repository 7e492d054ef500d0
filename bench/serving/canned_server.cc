// flashserve-canned-server: the real serving path with the model taken out, to measure what
// the pipeline itself sustains (issue 8: the load client and gRPC must carry well over 100k
// tokens/s, so that the GPU is what a load run measures).
//
//   flashserve-canned-server --model PATH [--host 127.0.0.1] [--port 50051]
//       [--metrics-port 9464 | -1] [--max-num-seqs 256] [--max-batch-tokens 2048]
//       [--max-waiting 1024] [--noprefix_caching] [--kv-cache-tokens N] [--step-us 0]
//       [--canned-text TEXT]
//
// Everything but the forward pass is flashserve's own: api::Server (gRPC services, request
// validation, transport limits, health, metrics, access log), the tokenizer and chat template
// of the GGUF file (its weights are never read), the engine (scheduler, paged KV block
// bookkeeping, batch building, sampling specs, incremental detokenizing, stop checks) and the
// streaming reactor. The runner checks each batch like the real runners
// (model::validate_forward_batch) and answers at once (or after --step-us microseconds per
// step, to emulate a GPU's step time) with the tokens of --canned-text, cycled by position,
// so a stream's text is that text repeated. Logs as flashserve does ("listening on
// HOST:PORT (gRPC)"); SIGINT/SIGTERM drain and stop.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "model/batch_validation.h"
#include "model/config.h"
#include "model/gguf/gguf.h"
#include "model/model_loader.h"
#include "model/runner.h"
#include "model/text/chat_template.h"
#include "model/text/tokenizer.h"
#include "server/api/log.h"
#include "server/api/server.h"
#include "server/api/server_options.h"

ABSL_FLAG(std::string, model, "",
          "GGUF file whose config, tokenizer and chat template are served (weights unread)");
ABSL_FLAG(std::string, host, "127.0.0.1", "Address to listen on (gRPC and metrics)");
ABSL_FLAG(int, port, 50051, "gRPC port (0 = any free port, printed at start-up)");
ABSL_FLAG(int, metrics_port, 9464, "Prometheus /metrics port (0 = any free port, -1 = off)");
ABSL_FLAG(int, max_num_seqs, 256, "Sequences batched together per engine step");
ABSL_FLAG(int, max_batch_tokens, 2048, "Tokens (prefill chunks + decodes) per engine step");
ABSL_FLAG(int, max_waiting, 1024, "Requests that may wait for admission");
ABSL_FLAG(bool, prefix_caching, true, "Reuse the KV blocks of prompt prefixes seen before");
ABSL_FLAG(int64_t, kv_cache_tokens, 0,
          "KV cache size in tokens (bookkeeping only; 0 = max-num-seqs full contexts)");
ABSL_FLAG(int, step_us, 0,
          "Microseconds each engine step takes at least (0 = answer at once)");
ABSL_FLAG(std::string, canned_text, " The quick brown fox jumps over the lazy dog.",
          "Text whose tokens every sequence generates, cycled by position");

namespace flashserve::bench {
namespace {

constexpr int kBlockSize = 16;

// Answers every step with the canned tokens: sequence s's next token is
// canned[(position of the sampled token) % canned.size()]. The distribution it claims puts
// probability 1 on that token (logprob 0; other top entries -inf).
class CannedRunner final : public model::ModelRunner {
 public:
  CannedRunner(model::ModelConfig config, int num_kv_blocks, std::vector<int32_t> canned,
               std::chrono::microseconds step_time)
      : config_(std::move(config)),
        num_kv_blocks_(num_kv_blocks),
        canned_(std::move(canned)),
        step_time_(step_time) {}

  const model::ModelConfig& config() const override { return config_; }
  int num_kv_blocks() const override { return num_kv_blocks_; }
  int kv_block_size() const override { return kBlockSize; }

  absl::Status forward(const model::ForwardBatch& batch, std::vector<model::SampledToken>* sampled,
                       model::ForwardStats* /*stats*/) override {
    const auto begin = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(model::validate_forward_batch(batch, config_, num_kv_blocks_, kBlockSize));
    sampled->resize(batch.sample_seqs.size());
    for (size_t i = 0; i < batch.sample_seqs.size(); ++i) {
      const int s = batch.sample_seqs[i];
      const int32_t token = next_token(batch.positions[batch.cu_seqlens_q[s + 1] - 1] + 1);
      kernels::SampleResult r;
      r.token = token;
      r.logprob = 0;
      for (int k = 0; k < batch.sample_specs[i].num_top_logprobs; ++k) {
        r.top_tokens[k] = k == 0 ? token : (token + k) % config_.vocab_size;
        r.top_logprobs[k] = k == 0 ? 0.f : -std::numeric_limits<float>::infinity();
      }
      (*sampled)[i] = model::to_sampled_token(r, batch.sample_specs[i], config_.vocab_size);
    }
    if (step_time_.count() > 0) std::this_thread::sleep_until(begin + step_time_);
    return absl::OkStatus();
  }

 private:
  int32_t next_token(int position) const {
    return canned_[static_cast<size_t>(position) % canned_.size()];
  }

  const model::ModelConfig config_;
  const int num_kv_blocks_;
  const std::vector<int32_t> canned_;
  const std::chrono::microseconds step_time_;
};

struct CannedOptions {
  std::string text;
  std::chrono::microseconds step_time{0};
};

// ServerOptions::model_loader: the GGUF's config, tokenizer and chat template (as
// model::load_model reads them) and a CannedRunner instead of a backend.
absl::StatusOr<model::LoadedModel> load_canned(const std::string& path,
                                               const model::LoadOptions& load,
                                               const CannedOptions& canned) {
  model::LoadedModel m;
  ASSIGN_OR_RETURN(m.file, model::GgufFile::open(path));
  ASSIGN_OR_RETURN(m.config, model::config_from_gguf(*m.file));
  ASSIGN_OR_RETURN(m.tokenizer, model::tokenizer_from_gguf(*m.file));
  if (m.file->find("tokenizer.chat_template") != nullptr) {
    ASSIGN_OR_RETURN(model::ChatTemplate chat_template, model::ChatTemplate::from_gguf(*m.file));
    m.chat_template = std::move(chat_template);
  }
  std::vector<int32_t> ids = m.tokenizer->encode(canned.text, /*add_special=*/false,
                                                 /*parse_special=*/false);
  if (ids.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--canned-text: '", canned.text, "' has no tokens"));
  }
  const int64_t tokens = load.kv_cache_tokens > 0
                             ? load.kv_cache_tokens
                             : int64_t{std::max(load.max_num_seqs, 1)} * m.config.context_length;
  const int64_t num_blocks = (tokens + kBlockSize - 1) / kBlockSize;
  if (num_blocks > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-cache-tokens: ", tokens, " too many"));
  }
  m.device = "canned";
  m.backend_summary = absl::StrFormat(
      "canned runner: %d-token text cycled, every step answered %s; KV bookkeeping for %d "
      "blocks (no KV memory)",
      ids.size(),
      canned.step_time.count() > 0 ? absl::StrCat("after ", canned.step_time.count(), " us")
                                   : std::string("at once"),
      num_blocks);
  m.runner = std::make_unique<CannedRunner>(m.config, static_cast<int>(num_blocks),
                                            std::move(ids), canned.step_time);
  return m;
}

int g_signal_pipe[2] = {-1, -1};

extern "C" void on_signal(int signal) {
  const char byte = static_cast<char>(signal);
  (void)!write(g_signal_pipe[1], &byte, 1);
}

int run(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "flashserve-canned-server --model PATH [--port N] [--metrics-port N|-1] "
      "[--max-num-seqs N] [--step-us US] [--canned-text TEXT]");
  std::vector<std::string> args = api::dashes_to_underscores(argc, argv);
  std::vector<char*> pointers;
  for (std::string& a : args) pointers.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());
  const api::Logger logger;

  api::ServerOptions options;
  options.model_path = absl::GetFlag(FLAGS_model);
  options.device = "cpu";  // not used by the canned loader
  options.host = absl::GetFlag(FLAGS_host);
  options.port = absl::GetFlag(FLAGS_port);
  options.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  options.engine.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  options.engine.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  options.engine.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  options.engine.prefix_caching = absl::GetFlag(FLAGS_prefix_caching);
  options.kv_cache_tokens = absl::GetFlag(FLAGS_kv_cache_tokens);
  options.logger = &logger;
  const int step_us = absl::GetFlag(FLAGS_step_us);
  if (step_us < 0) {
    logger.error(absl::StrCat("--step-us ", step_us, " must be >= 0"));
    return 2;
  }
  const CannedOptions canned{absl::GetFlag(FLAGS_canned_text),
                             std::chrono::microseconds(step_us)};
  options.model_loader = [canned](const std::string& path, const model::LoadOptions& load) {
    return load_canned(path, load, canned);
  };
  if (absl::Status st = api::validate_server_options(options); !st.ok()) {
    logger.error(std::string(st.message()));
    return 2;
  }

  // Signal handlers that write to a pipe (threads started before main, such as a BLAS pool,
  // do not block signals, so sigwait would not see them).
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    logger.error(absl::StrCat("cannot create the signal pipe: ", std::strerror(errno)));
    return 1;
  }
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int signal : {SIGINT, SIGTERM}) sigaction(signal, &action, nullptr);

  absl::StatusOr<std::unique_ptr<api::Server>> server = api::Server::start(options);
  if (!server.ok()) {
    logger.error(absl::StrCat("cannot start: ", server.status().ToString()));
    return 1;
  }
  // The same lines as flashserve's (tests and bench/serving/run.sh read them).
  logger.info(absl::StrCat("listening on ", options.host, ":", (*server)->grpc_port(),
                           " (gRPC)"));
  if ((*server)->metrics_port() > 0) {
    logger.info(absl::StrCat("metrics on http://", options.host, ":",
                             (*server)->metrics_port(), "/metrics"));
  }
  if (absl::Status st = (*server)->load_model(); !st.ok()) {
    logger.error(absl::StrCat("cannot load the model: ", st.ToString()));
    return 1;
  }
  logger.info(absl::StrCat("model loaded: ", (*server)->model_summary()));
  logger.info("serving");
  char byte = 0;
  while (read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  logger.info(absl::StrCat("received ", strsignal(byte), ": draining"));
  (*server)->shutdown();
  logger.info("stopped");
  return 0;
}

}  // namespace
}  // namespace flashserve::bench

int main(int argc, char** argv) { return flashserve::bench::run(argc, argv); }
