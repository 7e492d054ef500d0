#pragma once
// Shared plumbing of the GEMV / GEMM benchmarks of bench/gemm/ (library
// flashserve_gemm_bench_util): random weights of any format filled on
// the device, and the device-to-device copy bandwidth (error checks: bench/bench_check.h).
// Plain C++ header.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "absl/status/status.h"
#include "bench/bench_check.h"
#include "kernels/quant/quant_layout.h"

namespace flashserve::kernels::bench {

inline constexpr double kDatasheetBytesPerSecond = 4.8e12;

// n bf16 values ~N(0, 1) * scale (sums of two uniforms) at x, from `seed`.
void fill_bf16(void* x, size_t n, uint32_t seed, float scale);

// One random weight tensor on the device, in format f, [rows, k]: random quant bits and
// fp16 scales in [2^-9, 2^-8) (finite, so validations stay meaningful); bf16 ~N(0, 0.02).
void fill_weight(WeightFormat f, void* w, int64_t rows, int64_t k, uint32_t seed);

// Bytes of a [rows, k] weight in format f on the device.
int64_t weight_bytes(WeightFormat f, int64_t rows, int64_t k);

// Median seconds per call of call(stream, i), i = 0 .. calls - 1 captured in one CUDA graph
// (one call made first, outside the capture, for one-time set-up), over `reps` replays
// after a warm-up replay.
double time_graph(int calls, int reps, const std::function<void(cudaStream_t, int)>& call);

// Bytes per second of a 1 GiB device-to-device copy (read + write), median of 5.
double copy_bandwidth();

}  // namespace flashserve::kernels::bench
