#pragma once
// The CUDA kernels of a Llama layer other than attention and the GEMMs: embedding gather,
// RMSNorm, RoPE fused with the KV-cache append, SwiGLU. Plain C++ API: POD params +
// launchers taking a stream; device code lives in kernels/layers.cu. Each has an fp32 CPU
// reference in kernels/cpu/ (rmsnorm.h, rope.h + attention_ref.h's kv_append_cpu,
// swiglu.h) and the same numerics: fp32 arithmetic on 16-bit inputs, one rounding to the
// 16-bit output type at the end.
//
// All pointers are device pointers; launchers are asynchronous on `stream`, never
// synchronise, and return InvalidArgument naming the value for a shape they do not support.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/rope.h"
#include "kernels/dtype.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashserve::kernels {

// out[t, :] = float(table[token_ids[t], :]): the residual stream starts in fp32.
struct EmbeddingParams {
  DType dtype = DType::kBf16;
  const void* table = nullptr;         // [vocab, dim]
  const int32_t* token_ids = nullptr;  // [num_tokens], each in [0, vocab)
  float* out = nullptr;                // [num_tokens, dim]
  int num_tokens = 0;
  int dim = 0;
};
absl::Status embedding_gather(const EmbeddingParams& p, cudaStream_t stream);

// out[r, :] = x[row(r), :] * (1 / sqrt(mean(x[row(r), :]^2) + eps)) * weight, with
// row(r) = rows[r] (a gather: the final norm reads only the last token of each sequence) or
// r when rows is null. The scale is rounded to float once, as in kernels/cpu/rmsnorm.h.
struct RmsNormParams {
  DType dtype = DType::kBf16;
  float* x = nullptr;             // [*, dim] fp32 residual stream (written only with partials)
  const int32_t* rows = nullptr;  // [num_rows] or nullptr
  const float* weight = nullptr;  // [dim]
  void* out = nullptr;            // [num_rows, dim]
  int num_rows = 0;
  int dim = 0;
  float eps = 0;
  // The output (bf16 only, dim a multiple of 32) rounded further to the int8 grid of the
  // quantized GEMV, as round_activations_q8 (kernels/quant/quant_gemv.h) would round it
  // afterwards, bit for bit: the input of a GEMM on native weights, one launch fewer.
  bool round_q8 = false;
  // A split-k sum still to be added into x (kernels/quant/quant_gemm.h, defer_reduction: the
  // O and down projections, whose GEMM accumulates into the residual): x[r, i] += the sum of
  // partials[s][r][i] over s = 0 .. splits - 1, in that order, then x[r, :] is stored back and
  // normalized. Bit for bit quant_gemm_reduce() followed by this norm without partials. Needs
  // rows == nullptr (every row of x is brought up to date).
  const float* partials = nullptr;  // [splits][num_rows][dim] fp32
  int splits = 0;
};
absl::Status rmsnorm(const RmsNormParams& p, cudaStream_t stream);

// The attention input of one layer from the fused QKV projection: adds the Q/K/V bias (when
// set), normalises each Q and K head by RMSNorm over head_dim (when the norm weights are
// set: Qwen3's Q/K norm, kernels/cpu/rmsnorm.h on each head as one row), rotates Q and K by
// RoPE (pairs and angles of kernels/cpu/rope.h, from tables built by rope_cos_sin_cpu),
// writes Q packed for the attention kernels and K, V straight into the paged cache at
// slot_mapping (kernels/paged_kv.h; a negative slot is padding and skipped). The bias is
// added in fp32 to the qkv values as stored (bf16 / fp16), then everything stays fp32 until
// the rotated values are stored.
struct RopeAppendParams {
  DType dtype = DType::kBf16;
  const void* qkv = nullptr;  // [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim]
  const float* cos = nullptr;            // [num_positions, head_dim / 2]
  const float* sin = nullptr;            // [num_positions, head_dim / 2]
  const int32_t* positions = nullptr;    // [num_tokens], each in [0, num_positions)
  const int32_t* slot_mapping = nullptr; // [num_tokens]
  void* q_out = nullptr;                 // [num_tokens, num_heads, head_dim]
  void* k_cache = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  void* v_cache = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  int num_tokens = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // even
  int block_size = 0;
  RopeStyle style = RopeStyle::kAdjacentPairs;
  const float* bias = nullptr;    // [(num_heads + 2 * num_kv_heads) * head_dim] or null
  const float* q_norm = nullptr;  // [head_dim] or null; set together with k_norm
  const float* k_norm = nullptr;  // [head_dim] or null
  float norm_eps = 0;             // with q_norm / k_norm
};
absl::Status rope_qkv_append(const RopeAppendParams& p, cudaStream_t stream);

// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)), from the fused gate/up projection.
struct SwigluParams {
  DType dtype = DType::kBf16;
  const void* gate_up = nullptr;  // [num_rows, 2 * ffn_size]: gate | up
  void* out = nullptr;            // [num_rows, ffn_size]
  int num_rows = 0;
  int ffn_size = 0;
  // As RmsNormParams::round_q8 (bf16 only, ffn_size a multiple of 32).
  bool round_q8 = false;
  // gate_up not yet written: its split-k partial sums (kernels/quant/quant_gemm.h,
  // defer_reduction) instead. Each gate and up value is the sum of partials[s][r][j] over s
  // in order, rounded to dtype and read back, as quant_gemm_reduce() would have stored it:
  // bit for bit that reduction followed by this kernel on gate_up. gate_up is not read.
  const float* partials = nullptr;  // [splits][num_rows][2 * ffn_size] fp32
  int splits = 0;
};
absl::Status swiglu(const SwigluParams& p, cudaStream_t stream);

}  // namespace flashserve::kernels
