// round_activations_q8() of kernels/quant/quant_gemv.h: four lanes a unit of 32 bf16
// activations (round_chunks_in_place_q8 below, with quant_round.cuh's round_q8_lanes)
// quantize them exactly as the quantized GEMV stages its input (quant::quantize_unit's dx and levels, kernels/quant/
// quant_unit.h) and write back bf16(dx * q), so that a GEMM over dequantized weights sees
// the activations the GEMV would have seen (up to the bf16 rounding of dx * q: 2^-9
// relative, against the int8 step of amax / 127).
#include <cuda_bf16.h>

#include <algorithm>
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

// x[0, num_chunks * 8) (bf16, 16-byte aligned, num_chunks a multiple of 4: whole units)
// rounded in place, a lane a 16-byte chunk (8 values, 4 lanes a unit): the warp's lanes take
// chunks first + lane, first + 32 + lane, ... with first a multiple of 32, each load and
// store a warp's 512 contiguous bytes. Every lane of the warp calls it with the same first,
// stride (a multiple of 32) and num_chunks.
__device__ __forceinline__ void round_chunks_in_place_q8(__nv_bfloat16* x, int64_t num_chunks,
                                                         int64_t first, int64_t stride) {
  uint4* x4 = reinterpret_cast<uint4*>(x);
  const int lane = threadIdx.x % 32;
  for (int64_t c0 = first; c0 < num_chunks; c0 += stride) {  // warp-uniform
    const int64_t c = c0 + lane;
    float v[8] = {};
    if (c < num_chunks) quant_gemv::widen_bf16x8(x4[c], v);
    round_q8_lanes<8>(v);
    if (c < num_chunks) x4[c] = quant_gemv::narrow_bf16x8(v);
  }
}

// A lane a 16-byte chunk (4 lanes a unit), a grid-stride loop over the chunks.
__global__ void __launch_bounds__(kThreads) round_kernel(__nv_bfloat16* x, int64_t num_chunks) {
  wait_for_prior_grid();  // the activations are the previous kernel's output
  allow_next_grid();
  const int64_t warp_first = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / 32 * 32;
  round_chunks_in_place_q8(x, num_chunks, warp_first, static_cast<int64_t>(gridDim.x) * kThreads);
}

}  // namespace
}  // namespace device::quant_round

absl::Status round_activations_q8(void* x, int64_t num_rows, int64_t k, cudaStream_t stream) {
  if (num_rows < 0 || k <= 0 || k % kQuantUnit != 0 || x == nullptr ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("round_activations_q8: ", num_rows, " rows of ",
                                                   k, " (k a multiple of 32, x 16-byte aligned)"));
  }
  const int64_t chunks = num_rows * (k / 8);  // 16-byte chunks, 4 a unit
  if (chunks == 0) return absl::OkStatus();
  constexpr int64_t kMaxBlocks = 4096;  // ~4 waves of 256-thread blocks on 132 SMs
  const int64_t blocks = std::min(
      kMaxBlocks, (chunks + device::quant_round::kThreads - 1) / device::quant_round::kThreads);
  CUDA_CHECK(device::launch_dependent(device::quant_round::round_kernel, static_cast<unsigned>(blocks),
                                      device::quant_round::kThreads, 0, stream,
                                      static_cast<__nv_bfloat16*>(x), chunks));
  return absl::OkStatus();
}

}  // namespace flashserve::kernels
