#pragma once
// Which path a native (quantized) matrix's GEMM takes for a step of m tokens past the
// GEMV's rows: the quantized tensor-core GEMM (kernels/quant/quant_gemm.h), or the matrix
// dequantized to bf16 into a workspace and cuBLASLt ("deq+blas"). A pure function of the
// step's size and kind (all decodes or not), the matrix and the device's crossover, so a
// batch runs the same kernels every time; gemm_linear (llama_forward.cc) applies it, tests/unit/model_cuda pins it down.
//
// Up to max_tokens (kernels::quant_gemm_max_tokens(): the device's measured crossover) the
// quantized GEMM, past it deq+blas. Below the crossover two kinds of matrix take deq+blas too,
// where the quantized GEMM's grid is too small for the SMs and split-k's partial sums cost
// more than dequantizing: from kDeqBlasFromTokens a small matrix (more than
// kTinyMatrixElements and at most kSmallMatrixElements weights: the 1B's qkv and o, 24 and 16
// row tiles of 128 on 132 SMs; kernel bench at 256 tokens, bench/gemm/results/lean_epilogue:
// 1B qkv 14.0 us deq+blas against 17.8, o 11.4 against 13.6; 8B o (16.8 M weights) and 1B
// down stay quantized), and from kTinyDeqBlasFromTokens a tiny one (every SmolLM2-135M
// matrix). Up to 64 tokens a tiny matrix is the quantized GEMM's narrow kernel (kernels/quant/
// quant_gemm_narrow.cu: 16-32 row tiles over the whole k, its weights decoded before the PDL
// wait), in either kind of step: no per-step dequantize. Past 64, a layer's small and tiny
// matrices are dequantized together, by one launch (native_gemm_dequant_grouped; in a
// decode-only step on a second stream during the previous layer, model/cuda/dequant_group.h):
// one by one a SmolLM2 matrix's dequantize was ~3 us of latency, 120 launches a step.
// Measured (bench/gemm/NOTES.md, twenty-second session): SmolLM2 decode step at 256 sequences
// 2.10 -> 1.78 ms, 128 sequences 1.66 -> 1.38; the 128-row quantized GEMM with 64-token tiles
// and split k had lost to cuBLASLt on these shapes at every size past 64 tokens. At 64 the
// grouped dequantize was the whole served gap to bf16 weights (0.90-0.93x at 64 streams; a
// build without it served at par: bench/serving/NOTES.md, step 23), which the second stream
// did not hide; the narrow kernel replaced it there (bench/serving/NOTES.md, step 24).
// A matrix in two parts of different formats
// ([wq; wk] + wv, Q4_K_M's Q6_K attn_v) follows the same rule: with the lean epilogue its two
// quantized launches (wv's on the side stream) beat dequantizing both parts, 8B Q4_K_M decode
// step at 256 sequences 10.108 -> 9.970 ms (bench/gemm/NOTES.md, fifteenth session); before
// it they lost (bench/serving/NOTES.md step 14).
//
// The split-k sum of an O, down or gate/up projection on the quantized GEMM is folded into the
// kernel that reads its output next (RMSNorm, SwiGLU: DeviceWorkspace::pending in
// model/cuda/llama_forward.h) up to kFoldSplitSumMaxTokens tokens, and added by the reduction
// kernel past them. Measured on the H200 (bench/gemm/NOTES.md, eighteenth session; decode step
// at context 192): 64 sequences, 1B 1.541 -> 1.477 ms (head and fold in one call), 8B 6.054 ->
// 5.883 (two calls; bf16 5.889 beside the fold): O and down split k 8-16 ways, and the
// reduction kernels' launches and GPU gaps go. 256 sequences, 1B GPU span 2.529 -> 2.801, 8B
// 10.730 -> 10.835: k split 4-8 ways over 4x the rows, where the norm's fold (one block a row)
// reads the partials slower than the reduction kernel spread over every SM; a SmolLM2 prefill
// step of 512 tokens folding its tiny matrices' sums: RMSNorm 0.18 -> 0.58 ms (twenty-second
// session). 65-255 tokens were not measured and keep the reduction.
#include <cstdint>

namespace flashserve::model::cuda {

inline constexpr int kDeqBlasFromTokens = 129;
inline constexpr int kTinyDeqBlasFromTokens = 65;
inline constexpr int kFoldSplitSumMaxTokens = 64;
inline constexpr int64_t kSmallMatrixElements = int64_t{8} << 20;
inline constexpr int64_t kTinyMatrixElements = int64_t{2} << 20;

// Whether the n x k native matrix (all its parts) multiplies the m rows of a step by
// deq+blas, on a device whose quantized GEMM wins up to max_tokens tokens.
constexpr bool native_gemm_by_deq_blas(int m, int64_t n, int64_t k, int max_tokens) {
  if (m > max_tokens) return true;
  if (n * k <= kTinyMatrixElements) return m >= kTinyDeqBlasFromTokens;
  return m >= kDeqBlasFromTokens && n * k <= kSmallMatrixElements;
}

// Whether a matrix that takes deq+blas is dequantized together with the layer's other such
// matrices, by one launch (kernels::dequantize_bf16_batch) into consecutive bf16 copies.
constexpr bool native_gemm_dequant_grouped(int64_t n, int64_t k) {
  return n * k <= kSmallMatrixElements;
}

// Whether, in a decode-only step, a layer's group that holds the n x k matrix is dequantized
// on the side stream during the layer before (dequant_group.h), rather than on the stream at
// the layer's start: only for tiny matrices (every one of SmolLM2-135M's), whose ~30 serial
// launches of ~3-4 us of latency each the side stream hides. A small matrix's group (the 1B's
// qkv and o: 21 MB of copies a layer) is bandwidth, not latency: beside the layer before, it
// slows the kernels it shares the SMs and HBM with about as much as it takes on the stream
// (bench/gemm/NOTES.md, thirty-third session).
constexpr bool native_gemm_group_forked(int64_t n, int64_t k) {
  return n * k <= kTinyMatrixElements;
}

// Whether the quantized GEMM of a step of m tokens leaves its split-k sum to the kernel that
// reads its output next (where the caller can fold it: O, down, gate/up).
constexpr bool native_gemm_folds_split_sum(int m) { return m <= kFoldSplitSumMaxTokens; }

}  // namespace flashserve::model::cuda
