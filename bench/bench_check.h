#pragma once
// The benchmarks' error checks (bench/attention, bench/gemm): a failed CUDA call or status
// prints where and why, and exits 1. Benchmarks are programs, not libraries: no recovery.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"

#define BENCH_CUDA(expr)                                                                     \
  do {                                                                                       \
    const cudaError_t e_ = (expr);                                                           \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)
#define BENCH_OK(status_expr)                                                   \
  do {                                                                          \
    const absl::Status s_ = (status_expr);                                      \
    if (!s_.ok()) {                                                             \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_.ToString().c_str()); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)
