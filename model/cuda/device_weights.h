#pragma once
// The weights of a Llama-family decoder on the device, bf16 for every matrix (dequantized
// from any GGUF type we read, then rounded to nearest-even bf16 once) and fp32 for the
// norms. The projections that read the same input are concatenated along the output
// dimension so that each is one GEMM:
//   wqkv    = [wq; wk; wv]       [(num_heads + 2 * num_kv_heads) * head_dim, hidden]
//   w_gate_up = [w_gate; w_up]   [2 * ffn_size, hidden]
// Rows keep GGUF's order (model/weights.h), so Q/K rows stay permuted for adjacent-pair RoPE.
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/cuda/device_buffer.h"

namespace flashserve::model {
class GgufFile;
}

namespace flashserve::model::cuda {

struct DeviceLayer {
  DeviceBuffer attn_norm;  // [hidden] fp32
  DeviceBuffer wqkv;       // [(num_heads + 2 * num_kv_heads) * head_dim, hidden] bf16
  DeviceBuffer bqkv;       // [(num_heads + 2 * num_kv_heads) * head_dim] fp32; config.qkv_bias
  DeviceBuffer q_norm;     // [head_dim] fp32; config.qk_norm
  DeviceBuffer k_norm;     // [head_dim] fp32; config.qk_norm
  DeviceBuffer wo;         // [hidden, num_heads * head_dim] bf16
  DeviceBuffer ffn_norm;   // [hidden] fp32
  DeviceBuffer w_gate_up;  // [2 * ffn_size, hidden] bf16
  DeviceBuffer w_down;     // [hidden, ffn_size] bf16
};

struct DeviceWeights {
  DeviceBuffer token_embd;   // [vocab, hidden] bf16
  std::vector<DeviceLayer> layers;
  DeviceBuffer output_norm;  // [hidden] fp32
  DeviceBuffer output;       // [vocab, hidden] bf16; empty when tied
  int64_t bytes = 0;         // device memory held

  const void* lm_head() const { return output.get() != nullptr ? output.get() : token_embd.get(); }
};

// Reads, dequantizes and uploads every tensor, one layer at a time (host memory peaks at
// one layer in fp32). Errors of model/weights.h pass through; ResourceExhausted naming the
// sizes when the device runs out of memory.
absl::StatusOr<DeviceWeights> upload_llama_weights(const GgufFile& file,
                                                   const ModelConfig& config);

}  // namespace flashserve::model::cuda
