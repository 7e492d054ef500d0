// flashserve-canned-server: the real serving path with the model taken out, to measure what
// the pipeline itself sustains (issue 8: the load client and gRPC must carry well over 100k
// tokens/s, so that the GPU is what a load run measures).
//
//   flashserve-canned-server --model PATH [--step-us 0] [--canned-text TEXT] [server flags]
//
// Everything but the forward pass is flashserve's own: the server binary's flags, logs and
// life cycle (server/server_main.h: `--host`, `--port`, `--max-num-seqs`, `--kv-cache-tokens`,
// ... as flashserve takes them; SIGINT/SIGTERM drain and stop), api::Server (gRPC services,
// request validation, transport limits, health, metrics, access log), the tokenizer and chat
// template of the GGUF file (its weights are never read), the engine (scheduler, paged KV
// block bookkeeping, batch building, sampling specs, incremental detokenizing, stop checks)
// and the streaming reactor. The runner checks each batch like the real runners
// (model::validate_forward_batch) and answers at once (or after --step-us microseconds per
// step, to emulate a GPU's step time) with the tokens of --canned-text, cycled by position,
// so a stream's text is that text repeated. `--device` is not used.
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "model/batch_validation.h"
#include "model/config.h"
#include "model/gguf/gguf.h"
#include "model/model_loader.h"
#include "model/runner.h"
#include "model/step_budget.h"
#include "model/text/chat_template.h"
#include "model/text/tokenizer.h"
#include "server/api/server_options.h"
#include "server/server_main.h"

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

// The model this binary serves: the GGUF's config, tokenizer and chat template (as
// model::load_model reads them) and a CannedRunner instead of a backend. The KV bookkeeping
// covers --kv-cache-tokens, or --max-num-seqs full contexts.
absl::StatusOr<model::LoadedModel> load_canned(const api::ServerOptions& options,
                                               const CannedOptions& canned) {
  if (canned.step_time.count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--step-us ", canned.step_time.count(), " must be >= 0"));
  }
  model::LoadedModel m;
  ASSIGN_OR_RETURN(m.file, model::GgufFile::open(options.model_path));
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
  const int64_t tokens =
      options.kv_cache_tokens > 0
          ? options.kv_cache_tokens
          : int64_t{std::max(options.engine.max_num_seqs, 1)} * m.config.context_length;
  const int64_t num_blocks = (tokens + kBlockSize - 1) / kBlockSize;
  if (num_blocks > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-cache-tokens: ", tokens, " too many"));
  }
  m.device = "canned";
  m.max_batch_tokens = options.engine.max_batch_tokens > 0 ? options.engine.max_batch_tokens
                                                           : model::kDefaultStepTokens;
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

}  // namespace
}  // namespace flashserve::bench

int main(int argc, char** argv) {
  using flashserve::api::ServerOptions;
  return flashserve::server::run_server(
      argc, argv,
      {.name = "flashserve-canned-server",
       .usage = "--model PATH [--step-us US] [--canned-text TEXT] [flashserve's flags]",
       .flags_file = __FILE__,
       .load_model = [](const ServerOptions& options) {
         const flashserve::bench::CannedOptions canned{
             absl::GetFlag(FLAGS_canned_text),
             std::chrono::microseconds(absl::GetFlag(FLAGS_step_us))};
         return flashserve::bench::load_canned(options, canned);
       }});
}
