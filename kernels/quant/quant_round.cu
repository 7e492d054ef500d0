// round_activations_q8() of kernels/quant/quant_gemv.h: one thread per unit of 32 bf16
// activations quantizes them exactly as the quantized GEMV stages its input
// (quant::quantize_unit, kernels/quant/quant_unit.h; store_unit_rounded_q8 in
// quant_round.cuh) and writes back bf16(dx * q), so that a
// GEMM over dequantized weights sees the activations the GEMV would have seen (up to the
// bf16 rounding of dx * q: 2^-9 relative, against the int8 step of amax / 127).
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/quant/quant_gemv.cuh"
#include "kernels/quant/quant_gemv.h"
#include "kernels/quant/quant_round.cuh"
#include "kernels/quant/quant_unit.h"

namespace flashserve::kernels {
namespace device::quant_round {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) round_kernel(__nv_bfloat16* x, int64_t num_units) {
  wait_for_prior_grid();  // the activations are the previous kernel's output
  allow_next_grid();
  const int64_t u = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (u >= num_units) return;
  round_units_in_place_q8(x + u * kQuantUnit, 1, 0, 1);
}

}  // namespace
}  // namespace device::quant_round

absl::Status round_activations_q8(void* x, int64_t num_rows, int64_t k, cudaStream_t stream) {
  if (num_rows < 0 || k <= 0 || k % kQuantUnit != 0 || x == nullptr ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("round_activations_q8: ", num_rows, " rows of ",
                                                   k, " (k a multiple of 32, x 16-byte aligned)"));
  }
  const int64_t units = num_rows * (k / kQuantUnit);
  if (units == 0) return absl::OkStatus();
  const int64_t blocks = (units + device::quant_round::kThreads - 1) / device::quant_round::kThreads;
  CUDA_CHECK(device::launch_dependent(device::quant_round::round_kernel, static_cast<unsigned>(blocks),
                                      device::quant_round::kThreads, 0, stream,
                                      static_cast<__nv_bfloat16*>(x), units));
  return absl::OkStatus();
}

}  // namespace flashserve::kernels
