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

}  // namespace flashserve::kernels::device
