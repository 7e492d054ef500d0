#pragma once
// Which path a native (quantized) matrix's GEMM takes for a step of m tokens past the
// GEMV's rows: the quantized tensor-core GEMM (kernels/quant/quant_gemm.h), or the matrix
// dequantized to bf16 into a workspace and cuBLASLt ("deq+blas"). A pure function of the
// step's size, the matrix and the device's crossover, so a batch runs the same kernels every
// time; gemm_linear (llama_forward.cc) applies it, tests/unit/model_cuda pins it down.
//
// Up to max_tokens (kernels::quant_gemm_max_tokens(): the device's measured crossover) the
// quantized GEMM, past it deq+blas. From kDeqBlasFromTokens, a matrix of more than
// kTinyMatrixElements and at most kSmallMatrixElements weights (the 1B's qkv and o: 24 and 16
// row tiles of 128 on 132 SMs) takes deq+blas below the crossover too: there the quantized GEMM's
// grid is too small for the SMs and split-k's partial sums cost more than dequantizing the
// matrix. Kernel bench at 256 tokens (bench/gemm/results/lean_epilogue): 1B qkv 14.0 us
// deq+blas against 17.8, o 11.4 against 13.6; 8B o (16.8 M weights) and 1B down stay
// quantized. A matrix in two parts of different formats ([wq; wk] + wv, Q4_K_M's Q6_K attn_v)
// follows the same rule: with the lean epilogue its two quantized launches (wv's on the side
// stream) beat dequantizing both parts, 8B Q4_K_M decode step at 256 sequences 10.108 ->
// 9.970 ms (bench/gemm/NOTES.md, fifteenth session); before it they lost (bench/serving/
// NOTES.md step 14).
//
// The split-k sum of an O, down or gate/up projection on the quantized GEMM is folded into the
// kernel that reads its output next (RMSNorm, SwiGLU: DeviceWorkspace::pending in
// model/cuda/llama_forward.h) up to kFoldSplitSumMaxTokens tokens, and added by the reduction
// kernel past them. Measured on the H200 (bench/gemm/NOTES.md, eighteenth session; decode step
// at context 192): 64 sequences, 1B 1.541 -> 1.477 ms (head and fold in one call), 8B 6.054 ->
// 5.883 (two calls; bf16 5.889 beside the fold): O and down split k 8-16 ways, and the
// reduction kernels' launches and GPU gaps go. 256 sequences, 1B GPU span 2.529 -> 2.801, 8B
// 10.730 -> 10.835: k split 4-8 ways over 4x the rows, where the norm's fold (one block a row)
// reads the partials slower than the reduction kernel spread over every SM. 65-255 tokens were
// not measured and keep the reduction.
#include <cstdint>

namespace flashserve::model::cuda {

inline constexpr int kDeqBlasFromTokens = 129;
inline constexpr int kFoldSplitSumMaxTokens = 64;
inline constexpr int64_t kSmallMatrixElements = int64_t{8} << 20;
// Tiny matrices (every SmolLM2-135M matrix: 0.33-1.77 M weights; the 1B's smallest has 4.2 M)
// stay on the quantized GEMM up to max_tokens, with the token tile of
// native_gemm_token_tile(). Kernel bench at 129-512 tokens (bench/gemm/results/session21/
// qgb_smollm2.md): the GPU time of a SmolLM2 layer's four GEMMs is within 0-10 % of deq+blas
// at 192 and 256 tokens (25.6 against 25.0 us at 256) and ~25 % above it at 384-512, but it
// is one launch a matrix where deq+blas is two: the steps past 128 tokens that are not
// graph-captured (prefill, decode mixed with prefill) are host-bound at this size (a
// SmolLM2 prefill step of 512 tokens: 423 launches native, 273 bf16, wall = enqueue), and
// the captured ones lose ~2 us of GPU idle a kernel boundary.
inline constexpr int64_t kTinyMatrixElements = int64_t{2} << 20;

// In a step of decodes only (replayed from a CUDA graph: GPU time counts, not launches), a
// tiny matrix takes deq+blas from this many tokens, dequantized with the layer's others
// (native_gemm_dequant_grouped).
inline constexpr int kTinyDeqBlasFromDecodeTokens = 65;

// Whether the n x k native matrix (all its parts) multiplies the m rows of a step by
// deq+blas, on a device whose quantized GEMM wins up to max_tokens tokens; `decodes_only`:
// the step's tokens are all decodes.
constexpr bool native_gemm_by_deq_blas(int m, int64_t n, int64_t k, int max_tokens,
                                       bool decodes_only) {
  if (m > max_tokens) return true;
  if (n * k <= kTinyMatrixElements) return decodes_only && m >= kTinyDeqBlasFromDecodeTokens;
  return m >= kDeqBlasFromTokens && n * k <= kSmallMatrixElements;
}

// Whether a matrix that takes deq+blas is dequantized together with the layer's other such
// matrices, by one launch (kernels::dequantize_bf16_batch) into consecutive bf16 copies: the
// small ones, whose dequantizes alone are a few microseconds of latency each.
constexpr bool native_gemm_dequant_grouped(int64_t n, int64_t k) {
  return n * k <= kSmallMatrixElements;
}

// The quantized GEMM's token tile for the n x k matrix at m tokens
// (kernels::QuantGemmParams::token_tile; 0: the launcher's, 64 up to 64 tokens, 128 up to 128
// and 256 past). A tiny matrix's few row tiles (5-24 of 128 rows) give the launcher's tiles
// too few CTAs for 132 SMs: 64-token tiles up to 256 tokens, 128 past (kernel bench, same
// file: SmolLM2 qkv at 256 tokens 6.2 us with 64-token tiles against 7.3 with 128 and 9.4
// with 256; at 384-512 the 128-token tiles win, 8.0 against 8.6-9.5). Past 64 tokens only:
// a device without the Hopper kernel (max_tokens 64) never gets a forced tile.
constexpr int native_gemm_token_tile(int m, int64_t n, int64_t k) {
  if (m <= 64 || n * k > kTinyMatrixElements) return 0;
  return m <= 256 ? 64 : 128;
}

// Whether the quantized GEMM of the n x k matrix at a step of m tokens leaves its split-k sum
// to the kernel that reads its output next (where the caller can fold it: O, down, gate/up).
// Up to kFoldSplitSumMaxTokens for every matrix; a tiny matrix at every step size, since its
// reader's rows are short (576 columns for SmolLM2's O and down, 1,536 for SwiGLU's gate/up
// halves): the 1B's and 8B's fold lost past 64 tokens because one block a row read 4-8 splits
// of 2,048-4,096 columns, slower than the reduction kernel spread over every SM.
constexpr bool native_gemm_folds_split_sum(int m, int64_t n, int64_t k) {
  return m <= kFoldSplitSumMaxTokens || n * k <= kTinyMatrixElements;
}

}  // namespace flashserve::model::cuda
