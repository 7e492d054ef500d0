#pragma once
// y[m, n] = x[m, k] . [w_0; w_1; ...]^T for matrices in a block format (kernels/quant/
// quant_layout.h) through cuBLASLt: each part's rows dequantized to bf16
// (kernels::dequantize_bf16, exactly ggml's values) into `scratch`, one chunk of rows at a
// time, each chunk multiplied as soon as it is written (Gemm::linear into its column block
// of y).
//
// Why chunks: dequantizing a whole 8B gate_up (235 MB of bf16) writes it to HBM and reads it
// back, ~2 x 2 bytes an element of traffic on top of the ~0.56 of the Q4 weight; a chunk small
// enough to stay in the L2 (H200: 60 MB) is written there and read from there by the GEMM
// right after, and the next chunk overwrites the same lines, so the bf16 bytes need not reach
// HBM at all. Smaller chunks also give the GEMM fewer tiles (wave quantization), so the
// chunk size is a measured trade-off (bench/gemm/NOTES.md, quant_gemm_bench --chunks).
//
// Numerics: the same bf16 weights and cuBLASLt's fp32 accumulation as one dequantize of the
// whole matrix; only the algorithm cuBLASLt picks per chunk shape (and so its summation
// order) may differ.
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "kernels/quant/quant_layout.h"
#include "model/cuda/gemm.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashserve::model::cuda {

// The chunk size for a device with an L2 of l2_bytes (measured: bench/gemm/NOTES.md).
int64_t dequant_chunk_bytes(int64_t l2_bytes);

// One matrix in a block format: rows x k, row-major, as kernels::quant_layout stores it.
struct QuantPart {
  kernels::WeightFormat format = kernels::WeightFormat::kQ4_K;
  const void* w = nullptr;
  int64_t rows = 0;
};

// The rows of a chunk of a [rows, k] part when chunks hold at most chunk_bytes of bf16:
// the part split into equal chunks (the last may be shorter), rows a multiple of 128 (so a
// chunk's output column block keeps the part's alignment up to 256 bytes); at least 128 rows
// whatever chunk_bytes says.
int64_t dequant_chunk_rows(int64_t rows, int64_t k, int64_t chunk_bytes);

// The scratch bytes dequant_gemm() needs for `parts` with rows of k and chunk_bytes.
int64_t dequant_gemm_scratch_bytes(std::span<const QuantPart> parts, int64_t k,
                                   int64_t chunk_bytes);

// y (out: GemmOut, [m][n] with n = the parts' rows summed, part i's columns after part
// i - 1's) from x [m, k] bf16. scratch: >= dequant_gemm_scratch_bytes(parts, k, chunk_bytes)
// bytes, 256-byte aligned. Asynchronous on `stream`, capturable. InvalidArgument for a
// scratch too small or an unsupported part (the dequantize's own checks).
absl::Status dequant_gemm(Gemm& gemm, std::span<const QuantPart> parts, const void* x, void* y,
                          int m, int k, GemmOut out, void* scratch, int64_t scratch_bytes,
                          int64_t chunk_bytes, cudaStream_t stream);

}  // namespace flashserve::model::cuda
