#pragma once
// Units of 32 activations rounded to the int8 grid the quantized GEMV computes with
// (kernels/quant/quant_gemv.h, round_activations_q8): device code shared by the
// stand-alone rounding kernel (quant_round.cu) and the kernels that fuse it into the
// writing of their output (kernels/layers.cu: RMSNorm and SwiGLU with round_q8; the decode
// attention with round_q8_out), so that all give the same bits. A unit is split over lanes
// (round_q8_lanes: the unit's largest |value| by shuffles), so that a warp's loads and
// stores stay contiguous and no thread walks a unit alone.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/quant/quant_layout.h"
#include "kernels/quant/quant_unit.h"

namespace flashserve::kernels::device {

// A unit split over lanes: kPer values a lane (1, 2, 4, 8, 16 or 32), the unit's 32 / kPer
// lanes consecutive and starting at a lane that is a multiple of 32 / kPer. v holds the
// lane's values as the bf16 tensor holds them (rounded to bf16, widened); on return each is
// dx * q as float, to be stored as bf16 (the bits of quant::quantize_unit over the whole
// unit: the unit's amax is an exact max however it is gathered, and each level depends only
// on its value and amax). Every lane of the warp calls it (a full-mask shuffle); a lane with
// nothing to round passes zeros, which move no amax, as long as its whole group of lanes
// has none.
template <int kPer>
__device__ __forceinline__ void round_q8_lanes(float (&v)[kPer]) {
  static_assert(kPer >= 1 && kPer <= kQuantUnit && kQuantUnit % kPer == 0);
  float amax = 0.f;
#pragma unroll
  for (int e = 0; e < kPer; ++e) amax = fmaxf(amax, fabsf(v[e]));
#pragma unroll
  for (int lanes = kQuantUnit / kPer / 2; lanes > 0; lanes /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, lanes));
  }
  float dx = 0.f, id = 0.f;
  quant::q8_step(amax, &dx, &id);
#pragma unroll
  for (int e = 0; e < kPer; ++e) v[e] = dx * static_cast<float>(quant::q8_level(v[e], id));
}

// 8 consecutive bf16 of a 16-byte word widened, and back (round to nearest even).
__device__ __forceinline__ void widen_bf16x8(const uint4& w, float (&v)[8]) {
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(b[j]);
    v[2 * j] = f.x;
    v[2 * j + 1] = f.y;
  }
}
__device__ __forceinline__ uint4 narrow_bf16x8(const float (&v)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
    w[j] = *reinterpret_cast<const uint32_t*>(&b);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

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
    if (c < num_chunks) widen_bf16x8(x4[c], v);
    round_q8_lanes<8>(v);
    if (c < num_chunks) x4[c] = narrow_bf16x8(v);
  }
}

}  // namespace flashserve::kernels::device
