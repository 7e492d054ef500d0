#pragma once
// The CPU backend: a ModelRunner (model/runner.h) that runs the fp32 forward pass
// (model/cpu/llama_forward.h) with weights dequantized to fp32 at load, GEMMs through OpenBLAS
// and attention through kernels::attention_tiled_cpu over an fp32 paged KV cache of
// [num_blocks, num_kv_heads, block_size, head_dim] per layer for K and for V.
//
// Thread-safety: like every ModelRunner, called by one thread (the engine's) at a time.
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/paged_kv.h"
#include "model/config.h"
#include "model/cpu/llama_forward.h"
#include "model/runner.h"
#include "model/weights.h"

namespace flashserve::model {

class GgufFile;

struct CpuRunnerOptions {
  int num_kv_blocks = 0;                    // blocks in the KV cache (per layer), >= 1
  int block_size = kernels::kKvBlockSize;   // tokens per block, >= 1
  int num_threads = 0;                      // OpenBLAS threads (process-wide); 0 = default
};

class CpuModelRunner final : public ModelRunner, public LogitsRunner {
 public:
  // Shares the (immutable) weights, so several runners (e.g. tests with different block
  // sizes) can use one copy. InvalidArgument naming the option for a bad option or weights
  // that do not match the config; Unimplemented for num_heads not a multiple of
  // num_kv_heads. Every architecture config_from_gguf accepts runs (model/config.h).
  static absl::StatusOr<std::unique_ptr<CpuModelRunner>> create(
      const ModelConfig& config, std::shared_ptr<const LlamaWeights> weights,
      const CpuRunnerOptions& options);
  // Dequantizes the weights from `file` (load_llama_weights), then create().
  static absl::StatusOr<std::unique_ptr<CpuModelRunner>> from_gguf(
      const GgufFile& file, const ModelConfig& config, const CpuRunnerOptions& options);

  const ModelConfig& config() const override { return config_; }
  int num_kv_blocks() const override { return cache_.num_blocks(); }
  int kv_block_size() const override { return cache_.block_size(); }
  const std::shared_ptr<const LlamaWeights>& weights() const { return weights_; }

  // Validates the batch (model/batch_validation.h), appends the new tokens' K/V to the
  // cache at slot_mapping and samples (kernels/cpu/sampling.h) from the last-token logits.
  absl::Status forward(const ForwardBatch& batch, std::vector<SampledToken>* sampled,
                       ForwardStats* stats) override;
  absl::Status forward_logits(const ForwardBatch& batch, int num_layers,
                              std::vector<float>* logits) override;

 private:
  CpuModelRunner(const ModelConfig& config, std::shared_ptr<const LlamaWeights> weights,
                 const CpuRunnerOptions& options);

  ModelConfig config_;
  std::shared_ptr<const LlamaWeights> weights_;
  PagedKvCache cache_;
  ForwardWorkspace workspace_;
  std::vector<float> logits_;  // [num_seqs, vocab] of the last forward()
};

}  // namespace flashserve::model
