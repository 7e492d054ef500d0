#pragma once
// Linear layers of a decode step at small batch, y[m, n] = x[m, k] . w[n, k]^T with m in
// [1, kGemvMaxRows], as one bandwidth-bound kernel that also does the layer's neighbours:
//
//   input   kBf16     x is bf16 [m, k] (the attention output, the SwiGLU output)
//           kRmsNorm  x is the fp32 residual stream: each row (gathered through `rows` when
//                     set) is normalised exactly as kernels::rmsnorm does and rounded to
//                     bf16, so RMSNorm + GEMM become one launch
//   output  kBf16 / kFp32      y = x w^T
//           kFp32Accumulate    y += x w^T in fp32 (the residual add of the O / down projection)
//           kSwiglu            w is [2n, k], gate rows then up rows (the fused gate/up
//                              projection); y = silu(g) * u in bf16 with g and u rounded to
//                              bf16 first, exactly as the GEMM + kernels::swiglu path
//           kRopeAppend        the fused QKV projection with kernels::rope_qkv_append as its
//                              epilogue (`rope` says where Q, K and V go; y is unused): each
//                              warp owns two adjacent outputs, which with
//                              RopeStyle::kAdjacentPairs are exactly one rotation pair
//
// Why: at m <= 8 a decode step's GEMMs are a few microseconds each, most of it launch and
// ramp, not the weight bytes (SmolLM2's QKV is 1.1 MB: 0.25 us at 4.8 TB/s). Fusing the
// norm, RoPE and the activation leaves four launches per layer besides attention.
// Each CTA normalises the m input rows into shared memory (m * k bf16), then every warp
// streams two weight rows with 16-byte loads and dots them with all m rows; warp
// shuffles reduce. fp32 accumulation; results differ from cuBLASLt's only in summation
// order. The fp32 reference is kernels/cpu/gemv.h.
//
// The weight is a {w_format, w} descriptor: bf16 rows, or a ggml block format repacked at
// load by kernels/quant/quant_layout.h's quant_repack(); every input and output kind works
// for every format (kernels/quant/quant_gemv.h says how the quantized kernel computes).
//
// All pointers are device pointers; the launcher is asynchronous on `stream`.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/layers.h"
#include "kernels/quant/quant_layout.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashserve::kernels {

inline constexpr int kGemvMaxRows = 8;
// Shared memory the staged input rows may take (m rounded up to a power of two, times k
// bf16): within every sm_80+ device's per-block limit.
inline constexpr int kGemvMaxSmemBytes = 160 * 1024;

enum class GemvInput { kBf16, kRmsNorm };
enum class GemvOutput { kBf16, kFp32, kFp32Accumulate, kSwiglu, kRopeAppend };

struct GemvParams {
  GemvInput input = GemvInput::kBf16;
  const void* x = nullptr;         // kBf16: bf16 [m, k]; kRmsNorm: fp32 [*, k]
  const int32_t* rows = nullptr;   // kRmsNorm: row r reads x row rows[r] (null: row r)
  const float* norm_weight = nullptr;  // kRmsNorm: [k]
  float eps = 0;                       // kRmsNorm
  const void* w = nullptr;  // bf16 [n, k], or [2 * n, k] for kSwiglu; or, for a quantized
                            // w_format, quant_layout(w_format, rows, k) of those rows
  WeightFormat w_format = WeightFormat::kBf16;
  GemvOutput output = GemvOutput::kBf16;
  void* y = nullptr;        // [m, n] bf16 (kBf16, kSwiglu) or fp32
  // kRopeAppend: as for rope_qkv_append, whose qkv it computes (rope.qkv is unused,
  // rope.num_tokens == m, rope_first_col + n <= (num_heads + 2 * num_kv_heads) * head_dim,
  // adjacent pairs).
  RopeAppendParams rope;
  // kRopeAppend: this launch computes QKV columns [rope_first_col, rope_first_col + n) of
  // all (num_heads + 2 * num_kv_heads) * head_dim (both multiples of head_dim). So Q and K
  // rows in one weight format and V rows in another (Q4_K_M files store attn_v as Q6_K in
  // some layers) are two launches, each with its own weight and format.
  int rope_first_col = 0;
  int m = 0, n = 0, k = 0;
};

// Whether gemv() takes this shape: m in [1, kGemvMaxRows], k a positive multiple of 8 (16-byte
// loads), the staged rows within kGemvMaxSmemBytes.
bool gemv_supported(int m, int k);
// The same for weights in format f (kernels/quant/quant_gemv.h for the quantized formats).
bool gemv_supported(WeightFormat f, int m, int k);

// InvalidArgument naming the value for an unsupported shape or a null pointer.
absl::Status gemv(const GemvParams& p, int num_sms, cudaStream_t stream);

}  // namespace flashserve::kernels
