#pragma once
// The CPU backend: a ModelRunner (model/runner.h) that runs the CPU forward pass
// (model/cpu/llama_forward.h) over CpuWeights (model/cpu/cpu_weights.h): by default the
// file's quantized matrices read in place by the quantized products (kernels/cpu/
// quant_matmul.h) on a persistent thread pool; or, as the reference, every weight
// dequantized to fp32 with GEMMs through OpenBLAS. Attention runs kernels::attention_tiled_cpu
// over an fp32 paged KV cache of [num_blocks, num_kv_heads, block_size, head_dim] per layer
// for K and for V.
//
// Thread-safety: like every ModelRunner, called by one thread (the engine's) at a time.
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/paged_kv.h"
#include "model/config.h"
#include "model/cpu/cpu_weights.h"
#include "model/cpu/llama_forward.h"
#include "model/cpu/thread_pool.h"
#include "model/runner.h"
#include "model/weights.h"

namespace flashserve::model {

class GgufFile;

struct CpuRunnerOptions {
  int num_kv_blocks = 0;                    // blocks in the KV cache (per layer), >= 1
  int block_size = kernels::kKvBlockSize;   // tokens per block, >= 1
  int num_threads = 0;  // threads of a step (and OpenBLAS's, process-wide); 0 = every core
  // from_gguf: the file's quantized matrices in place (true) or the fp32 reference (false).
  bool native_weights = true;
  // The quantized products' instruction set; unset = the best that runs here
  // (kernels::best_cpu_isa). One that does not run here is an InvalidArgument.
  std::optional<kernels::CpuIsa> isa;
};

class CpuModelRunner final : public ModelRunner, public LogitsRunner {
 public:
  // Shares the (immutable) weights, so several runners (e.g. tests with different block
  // sizes) can use one copy. InvalidArgument naming the option for a bad option or weights
  // that do not match the config; Unimplemented for num_heads not a multiple of
  // num_kv_heads. Every architecture config_from_gguf accepts runs (model/config.h).
  static absl::StatusOr<std::unique_ptr<CpuModelRunner>> create(
      const ModelConfig& config, std::shared_ptr<const CpuWeights> weights,
      const CpuRunnerOptions& options);
  // The fp32 reference weights (CpuWeights::from_fp32), then create().
  static absl::StatusOr<std::unique_ptr<CpuModelRunner>> create(
      const ModelConfig& config, std::shared_ptr<const LlamaWeights> weights,
      const CpuRunnerOptions& options);
  // options.native_weights: CpuWeights::native (REQUIRES: `file` outlives the runner);
  // otherwise the weights dequantized (load_llama_weights). Then create().
  static absl::StatusOr<std::unique_ptr<CpuModelRunner>> from_gguf(
      const GgufFile& file, const ModelConfig& config, const CpuRunnerOptions& options);

  const ModelConfig& config() const override { return config_; }
  int num_kv_blocks() const override { return cache_.num_blocks(); }
  int kv_block_size() const override { return cache_.block_size(); }
  const CpuWeights& weights() const { return *weights_; }
  kernels::CpuIsa isa() const { return workspace_.isa; }
  int num_threads() const { return pool_->num_threads(); }

  // Validates the batch (model/batch_validation.h), appends the new tokens' K/V to the
  // cache at slot_mapping and samples (kernels/cpu/sampling.h) from the last-token logits.
  absl::Status forward(const ForwardBatch& batch, std::vector<SampledToken>* sampled,
                       ForwardStats* stats) override;
  absl::Status forward_logits(const ForwardBatch& batch, int num_layers,
                              std::vector<float>* logits) override;

 private:
  CpuModelRunner(const ModelConfig& config, std::shared_ptr<const CpuWeights> weights,
                 const CpuRunnerOptions& options, kernels::CpuIsa isa, int num_threads);

  ModelConfig config_;
  std::shared_ptr<const CpuWeights> weights_;
  std::unique_ptr<ThreadPool> pool_;
  PagedKvCache cache_;
  ForwardWorkspace workspace_;
  std::vector<float> logits_;  // [num_seqs, vocab] of the last forward()
};

}  // namespace flashserve::model
