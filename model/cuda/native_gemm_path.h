#pragma once
// Which path a native (quantized) matrix's GEMM takes for a step of m tokens past the
// GEMV's rows: the quantized tensor-core GEMM (kernels/quant/quant_gemm.h), or the matrix
// dequantized to bf16 into a workspace and cuBLASLt ("deq+blas"). A pure function of the
// step's size, the matrix and the device's crossover, so a batch runs the same kernels every
// time; gemm_linear (llama_forward.cc) applies it, tests/unit/model_cuda pins it down.
//
// Up to max_tokens (kernels::quant_gemm_max_tokens(): the device's measured crossover) the
// quantized GEMM, past it deq+blas. From kDeqBlasFromTokens, a matrix of at most
// kSmallMatrixElements weights (the 1B's qkv and o: 24 and 16 row tiles of 128 on 132 SMs;
// every SmolLM2 matrix) takes deq+blas below the crossover too: there the quantized GEMM's
// grid is too small for the SMs and split-k's partial sums cost more than dequantizing the
// matrix. Kernel bench at 256 tokens (bench/gemm/results/lean_epilogue): 1B qkv 14.0 us
// deq+blas against 17.8, o 11.4 against 13.6; 8B o (16.8 M weights) and 1B down stay
// quantized. A matrix in two parts of different formats ([wq; wk] + wv, Q4_K_M's Q6_K attn_v)
// follows the same rule: with the lean epilogue its two quantized launches (wv's on the side
// stream) beat dequantizing both parts, 8B Q4_K_M decode step at 256 sequences 10.108 ->
// 9.970 ms (bench/gemm/NOTES.md, fifteenth session); before it they lost (bench/serving/
// NOTES.md step 14).
#include <cstdint>

namespace flashserve::model::cuda {

inline constexpr int kDeqBlasFromTokens = 129;
inline constexpr int64_t kSmallMatrixElements = int64_t{8} << 20;

// Whether the n x k native matrix (all its parts) multiplies the m rows of a step by
// deq+blas, on a device whose quantized GEMM wins up to max_tokens tokens.
constexpr bool native_gemm_by_deq_blas(int m, int64_t n, int64_t k, int max_tokens) {
  if (m > max_tokens) return true;
  return m >= kDeqBlasFromTokens && n * k <= kSmallMatrixElements;
}

}  // namespace flashserve::model::cuda
