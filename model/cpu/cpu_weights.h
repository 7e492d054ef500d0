#pragma once
// The weights as the CPU forward pass reads them: every projection matrix either fp32 rows
// or ggml blocks that the quantized products (kernels/cpu/quant_matmul.h) read in place.
//
// Two ways to make them:
//  - from_fp32: views of a LlamaWeights (model/weights.h), everything fp32: the reference
//    path (OpenBLAS sgemm; the golden tests and the GPU runner's reference use it);
//  - native: the matrices of the GGUF file in their block format (Q8_0, Q4_0, Q4_1, Q4_K,
//    Q5_K, Q6_K) pointing into the file's read-only mapping, so that resident memory is the
//    file's bytes; other types (F16, BF16, F32, Q5_0, Q2_K, ...) are dequantized to fp32 at
//    load. Q/K rows of files in HF RoPE order (config.neox_rows) are copied, permuted.
// Norm weights and biases are fp32 in both.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/quant/quant_layout.h"
#include "model/config.h"
#include "model/weights.h"

namespace flashserve::model {

class GgufFile;

// [rows, cols] row-major (a GGUF weight's [out][in]); y = x W^T.
struct CpuMatrix {
  const float* f32 = nullptr;      // fp32 rows, or null when quantized
  const uint8_t* blocks = nullptr;  // ggml blocks, row j at j * row_bytes, or null
  kernels::WeightFormat format = kernels::WeightFormat::kBf16;  // of `blocks`
  int64_t rows = 0, cols = 0;
  int64_t row_bytes = 0;  // of `blocks`

  bool quantized() const { return blocks != nullptr; }
  int64_t bytes() const { return quantized() ? rows * row_bytes : rows * cols * 4; }
  // dst[cols] = row `r` as floats (ggml's dequantization for blocks).
  void row_to_float(int64_t r, float* dst) const;
};

struct CpuLayerWeights {
  const float* attn_norm = nullptr;  // [hidden_size]
  CpuMatrix wq, wk, wv, wo;
  const float* bq = nullptr;  // [q_dim]; config.qkv_bias (bk, bv: [kv_dim])
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // [head_dim]; config.qk_norm
  const float* k_norm = nullptr;
  const float* ffn_norm = nullptr;  // [hidden_size]
  CpuMatrix w_gate, w_up, w_down;
  const float* attn_post_norm = nullptr;  // [hidden_size]; config.post_norms
  const float* ffn_post_norm = nullptr;
};

class CpuWeights {
 public:
  // Views of `fp32` (kept alive by the result).
  static std::shared_ptr<const CpuWeights> from_fp32(std::shared_ptr<const LlamaWeights> fp32);
  // The file's matrices in place. REQUIRES: `file` outlives the result. Errors as
  // load_llama_weights (model/weights.h): NotFound / InvalidArgument naming the tensor.
  static absl::StatusOr<std::shared_ptr<const CpuWeights>> native(const GgufFile& file,
                                                                  const ModelConfig& config);

  CpuMatrix token_embd;  // [vocab_size, hidden_size]
  std::vector<CpuLayerWeights> layers;
  const float* output_norm = nullptr;  // [hidden_size]
  CpuMatrix lm_head;     // [vocab_size, hidden_size]: output, or token_embd when tied

  // Bytes of the matrices as held (blocks or fp32) and of the fp32 vectors.
  int64_t num_bytes() const;
  // e.g. "q4_1 210 (63.3 MiB), q8_0 1 (28.7 MiB), fp32 vectors (0.1 MiB)".
  std::string summary() const;

 private:
  std::shared_ptr<const LlamaWeights> fp32_;  // from_fp32
  std::vector<std::vector<float>> floats_;     // native: vectors, dequantized matrices
  std::vector<std::vector<uint8_t>> copies_;   // native: permuted Q/K blocks
  int64_t vector_bytes_ = 0;                   // norm weights and biases
};

}  // namespace flashserve::model
