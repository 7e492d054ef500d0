#pragma once
// The weights of a Llama-family decoder on the device. Every projection matrix is a
// DeviceMatrix: either bf16 (dequantized from any GGUF type we read, then rounded to
// nearest-even bf16 once) or, with native weights, the file's own block format (Q8_0, Q4_0,
// Q4_1, Q4_K, Q5_K, Q6_K) repacked once for the quantized kernels (kernels/quant/
// quant_layout.h: the file's bytes plus < 1 KiB of alignment a matrix). Norms, biases and
// Q/K norm weights are fp32. The projections that read the same input are concatenated along
// the output dimension so that each is one GEMV / GEMM:
//   wqkv      = [wq; wk; wv]      [(num_heads + 2 * num_kv_heads) * head_dim, hidden]
//   w_gate_up = [w_gate; w_up]    [2 * ffn_size, hidden]
// When V's block format differs from Q's and K's (llama.cpp's Q4_K_M stores attn_v as Q6_K
// in some layers), wqkv holds [wq; wk] and wv holds V. Matrices whose parts differ in any
// other way, and types without a native kernel, are bf16.
// Rows are in adjacent-pair RoPE order (model/weights.h): NEOX-order Q/K rows (and their
// biases and norm weights) are permuted at load, block rows as whole byte ranges.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quant/quant_layout.h"
#include "model/config.h"
#include "model/cuda/device_buffer.h"

namespace flashserve::model {
class GgufFile;
}

namespace flashserve::model::cuda {

// One [rows, k] projection (rows = output features) in `format`'s device layout.
struct DeviceMatrix {
  DeviceBuffer data;
  kernels::WeightFormat format = kernels::WeightFormat::kBf16;
  int64_t rows = 0, k = 0;

  bool empty() const { return rows == 0; }
  bool native() const { return format != kernels::WeightFormat::kBf16; }
  const void* get() const { return data.get(); }
};

struct DeviceLayer {
  DeviceBuffer attn_norm;  // [hidden] fp32
  DeviceMatrix wqkv;       // [wq; wk; wv], or [wq; wk] when wv is set
  DeviceMatrix wv;         // empty unless V's native format differs from Q's and K's
  DeviceBuffer bqkv;       // [(num_heads + 2 * num_kv_heads) * head_dim] fp32; config.qkv_bias
  DeviceBuffer q_norm;     // [head_dim] fp32; config.qk_norm
  DeviceBuffer k_norm;     // [head_dim] fp32; config.qk_norm
  DeviceMatrix wo;         // [hidden, num_heads * head_dim]
  DeviceBuffer ffn_norm;   // [hidden] fp32
  DeviceMatrix w_gate_up;  // [2 * ffn_size, hidden]
  DeviceMatrix w_down;     // [hidden, ffn_size]
};

struct DeviceWeights {
  DeviceMatrix token_embd;   // [vocab, hidden]
  std::vector<DeviceLayer> layers;
  DeviceBuffer output_norm;  // [hidden] fp32
  DeviceMatrix output;       // [vocab, hidden]; empty when tied
  int64_t bytes = 0;         // device memory held
  int64_t native_bytes = 0;  // of which matrices in a block format
  // Largest bf16 copy the GEMMs of native matrices need at once (the step workspace's
  // `dequant`): one matrix, or a layer's group of small ones (llama_forward.h: DequantGroup).
  int64_t max_dequant_bytes = 0;

  const DeviceMatrix& lm_head() const { return output.empty() ? token_embd : output; }
  // For the start-up log: "native (Q4_K, Q6_K) 4.3 GiB + bf16 0.4 GiB" or "bf16 15.0 GiB".
  std::string summary() const;
};

// The device format a GGUF tensor type keeps with native weights; kBf16 for types without
// a native kernel (they are dequantized to bf16).
kernels::WeightFormat native_format(uint32_t ggml_type);

// Reads and uploads every tensor, one layer at a time (host memory peaks at one layer).
// native: quantized matrices stay in their block format where a kernel reads it; else every
// matrix is bf16. Errors of model/weights.h pass through; ResourceExhausted naming the sizes
// when the device runs out of memory.
absl::StatusOr<DeviceWeights> upload_llama_weights(const GgufFile& file,
                                                   const ModelConfig& config, bool native);

}  // namespace flashserve::model::cuda
