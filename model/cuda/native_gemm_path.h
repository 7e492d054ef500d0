#pragma once
// Which path a native (quantized) matrix's GEMM takes for a step of m tokens past the
// GEMV's rows: the quantized tensor-core GEMM (kernels/quant/quant_gemm.h), or the matrix
// dequantized to bf16 into a workspace and cuBLASLt ("deq+blas"). A pure function of the
// step's size, the matrix and the device's crossover, so a batch runs the same kernels every
// time; gemm_linear (llama_forward.cc) applies it, tests/unit/model_cuda pins it down.
//
// Up to max_tokens (kernels::quant_gemm_max_tokens(): the device's measured crossover) the
// quantized GEMM, past it deq+blas. From kDeqBlasFromTokens, two kinds of matrix take
// deq+blas below the crossover too, where the quantized GEMM's grid is too small for the SMs
// and split-k's partial sums cost more than dequantizing the matrix (measurements:
// bench/serving/NOTES.md step 14, bench/gemm/NOTES.md):
//   * a matrix in two parts of different formats ([wq; wk] + wv, Q4_K_M's Q6_K attn_v): the
//     quantized GEMM is two launches, wv's on 1,024 rows (8B) or 512 (1B). Decode-step bench,
//     1B Q4_K_M at 256 sequences: 3.76 -> 3.49 ms a step;
//   * a matrix of at most kSmallMatrixElements weights (the 1B's qkv and o: 24 and 16 row
//     tiles of 128 on 132 SMs; every SmolLM2 matrix). Kernel bench at 256 tokens
//     (bench/gemm/results_v9): 1B qkv 13.6 us deq+blas against 20.7, o 11.3 against 16.7;
//     8B o (16.8 M weights) 26.7 against 25.6 and 1B down 34.3 against 23.2 stay quantized.
#include <cstdint>

namespace flashserve::model::cuda {

inline constexpr int kDeqBlasFromTokens = 129;
inline constexpr int64_t kSmallMatrixElements = int64_t{8} << 20;

// Whether the n x k native matrix (two_part: [w; w2] of two formats) multiplies the m rows
// of a step by deq+blas, on a device whose quantized GEMM wins up to max_tokens tokens.
constexpr bool native_gemm_by_deq_blas(int m, int64_t n, int64_t k, bool two_part,
                                       int max_tokens) {
  if (m > max_tokens) return true;
  return m >= kDeqBlasFromTokens && (two_part || n * k <= kSmallMatrixElements);
}

}  // namespace flashserve::model::cuda
