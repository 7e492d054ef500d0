#include "model/cpu/cpu_runner.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/batch_validation.h"
#include "model/gguf/gguf.h"

namespace flashserve::model {

CpuModelRunner::CpuModelRunner(const ModelConfig& config,
                               std::shared_ptr<const CpuWeights> weights,
                               const CpuRunnerOptions& options, kernels::CpuIsa isa,
                               int num_threads)
    : config_(config),
      weights_(std::move(weights)),
      pool_(std::make_unique<ThreadPool>(num_threads)),
      cache_(config.num_layers, options.num_kv_blocks, config.num_kv_heads, options.block_size,
             config.head_dim) {
  workspace_.pool = pool_.get();
  workspace_.isa = isa;
}

absl::StatusOr<std::unique_ptr<CpuModelRunner>> CpuModelRunner::create(
    const ModelConfig& config, std::shared_ptr<const CpuWeights> weights,
    const CpuRunnerOptions& options) {
  if (options.num_kv_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu runner: num_kv_blocks must be >= 1, got ", options.num_kv_blocks));
  }
  if (options.block_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu runner: block_size must be >= 1, got ", options.block_size));
  }
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu runner: num_threads must be >= 0, got ", options.num_threads));
  }
  if (options.isa.has_value() && !kernels::cpu_isa_runs(*options.isa)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu runner: isa ", kernels::cpu_isa_name(*options.isa), " does not run on this CPU"));
  }
  if (config.num_kv_heads < 1 || config.num_heads % config.num_kv_heads != 0) {
    return absl::UnimplementedError(
        absl::StrCat("cpu runner: num_heads ", config.num_heads,
                     " is not a multiple of num_kv_heads ", config.num_kv_heads));
  }
  if (weights == nullptr || static_cast<int>(weights->layers.size()) != config.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu runner: weights have ", weights == nullptr ? 0 : weights->layers.size(),
        " layers, the config ", config.num_layers));
  }
  if (options.num_threads > 0) openblas_set_num_threads(options.num_threads);
  const int num_threads = options.num_threads > 0
                              ? options.num_threads
                              : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::unique_ptr<CpuModelRunner>(
      new CpuModelRunner(config, std::move(weights), options,
                         options.isa.value_or(kernels::best_cpu_isa()), num_threads));
}

absl::StatusOr<std::unique_ptr<CpuModelRunner>> CpuModelRunner::create(
    const ModelConfig& config, std::shared_ptr<const LlamaWeights> weights,
    const CpuRunnerOptions& options) {
  if (weights == nullptr) return absl::InvalidArgumentError("cpu runner: weights are null");
  return create(config, CpuWeights::from_fp32(std::move(weights)), options);
}

absl::StatusOr<std::unique_ptr<CpuModelRunner>> CpuModelRunner::from_gguf(
    const GgufFile& file, const ModelConfig& config, const CpuRunnerOptions& options) {
  if (options.native_weights) {
    ASSIGN_OR_RETURN(std::shared_ptr<const CpuWeights> weights,
                     CpuWeights::native(file, config));
    return create(config, std::move(weights), options);
  }
  ASSIGN_OR_RETURN(LlamaWeights weights, load_llama_weights(file, config));
  return create(config, std::make_shared<const LlamaWeights>(std::move(weights)), options);
}

absl::Status CpuModelRunner::forward(const ForwardBatch& batch,
                                     std::vector<SampledToken>* sampled, ForwardStats* stats) {
  if (sampled == nullptr) return absl::InvalidArgumentError("cpu runner: sampled is null");
  RETURN_IF_ERROR(
      validate_forward_batch(batch, config_, cache_.num_blocks(), cache_.block_size()));
  llama_forward_cpu(config_, *weights_, batch, config_.num_layers, &cache_, &workspace_,
                    &logits_, stats);
  const auto sampling_start = std::chrono::steady_clock::now();
  sample_cpu(config_, batch, &logits_, sampled);
  if (stats != nullptr) {  // sampling is part of "other" in the time breakdown
    stats->breakdown.other_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - sampling_start).count();
  }
  return absl::OkStatus();
}

absl::Status CpuModelRunner::forward_logits(const ForwardBatch& batch, int num_layers,
                                            std::vector<float>* logits) {
  if (logits == nullptr) return absl::InvalidArgumentError("cpu runner: logits is null");
  if (num_layers < 1 || num_layers > config_.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("cpu runner: num_layers ", num_layers,
                                                   " outside [1, ", config_.num_layers, "]"));
  }
  RETURN_IF_ERROR(
      validate_forward_batch(batch, config_, cache_.num_blocks(), cache_.block_size()));
  llama_forward_cpu(config_, *weights_, batch, num_layers, &cache_, &workspace_, logits,
                    nullptr);
  return absl::OkStatus();
}

}  // namespace flashserve::model
