#pragma once
// Bench-only: the dequantize kernel kernels::dequantize_bf16 replaced (one thread per unit
// of 32 elements, each writing its own 64 bytes of bf16 with four 16-byte stores), kept so
// that quant_gemm_bench times the old and the new kernel in one run (bench/gemm/NOTES.md).
// bf16 output, row ranges only (no gather, no fp32). Delete it once the comparison is
// recorded in bench/gemm/RESULTS_*.md.
#include "absl/status/status.h"
#include "kernels/quant/quant_gemv.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashserve::kernels::bench {

absl::Status dequantize_unit_per_thread(const DequantizeParams& p, cudaStream_t stream);

}  // namespace flashserve::kernels::bench
