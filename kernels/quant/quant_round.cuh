#pragma once
// One unit of 32 activations rounded to the int8 grid the quantized GEMV computes with
// (kernels/quant/quant_gemv.h, round_activations_q8): device code shared by the
// stand-alone rounding kernel (quant_round.cu) and the kernels that fuse it into the
// writing of their output (kernels/layers.cu: RMSNorm and SwiGLU with round_q8), so that
// both give the same bits.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/quant/quant_gemv.cuh"
#include "kernels/quant/quant_unit.h"

namespace flashserve::kernels::device {

// v: the unit's 32 values as the bf16 tensor holds them (already rounded to bf16, widened);
// writes bf16(dx * q) for each, dx and q from quant::quantize_unit (quantize_q8_cpu's),
// as four 16-byte stores to `out` (16-byte aligned).
__device__ __forceinline__ void store_unit_rounded_q8(const float (&v)[kQuantUnit],
                                                      __nv_bfloat16* out) {
  uint32_t words[8];
  int sum = 0, sum_lo = 0;
  float dx = 0.f;
  quant::quantize_unit(v, words, &sum, &sum_lo, &dx);
  uint32_t pairs[kQuantUnit / 2];
#pragma unroll
  for (int e = 0; e < kQuantUnit; e += 2) {
    const int q0 = static_cast<int8_t>((words[e / 4] >> (8 * (e % 4))) & 0xffu);
    const int q1 = static_cast<int8_t>((words[(e + 1) / 4] >> (8 * ((e + 1) % 4))) & 0xffu);
    const __nv_bfloat162 b = __floats2bfloat162_rn(dx * static_cast<float>(q0),
                                                   dx * static_cast<float>(q1));
    pairs[e / 2] = *reinterpret_cast<const uint32_t*>(&b);
  }
  uint4* dst = reinterpret_cast<uint4*>(out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    dst[i] = make_uint4(pairs[4 * i], pairs[4 * i + 1], pairs[4 * i + 2], pairs[4 * i + 3]);
  }
}

// Units [0, num_units) of x (bf16, 16-byte aligned) rounded in place, thread `thread` of
// `threads` taking units thread, thread + threads, ...: what round_activations_q8's kernel
// does, for a kernel that rounds the output it has just written (the decode attention's,
// after a barrier that makes its CTA's stores visible).
__device__ __forceinline__ void round_units_in_place_q8(__nv_bfloat16* x, int num_units,
                                                        int thread, int threads) {
  for (int u = thread; u < num_units; u += threads) {
    float v[kQuantUnit];
    quant_gemv::load_bf16_unit(x + int64_t{u} * kQuantUnit, v);
    store_unit_rounded_q8(v, x + int64_t{u} * kQuantUnit);
  }
}

}  // namespace flashserve::kernels::device
