#pragma once
// 2^x for x <= 0 on the FMA and integer pipes instead of the special-function unit (SFU):
// the softmax of the Hopper prefill kernel at head_dim 64 needs as many MUFU.EX2 cycles a
// tile as wgmma cycles (bench/attention/NOTES.md v11), so it computes a fixed share of its
// exponentials here (FlashAttention-4 does the same on Blackwell).
//
// Numerics: n = round(x) by adding and subtracting 1.5 * 2^23 (fp32 round-to-nearest puts
// the integer in the mantissa), f = x - n in [-1/2, 1/2] exactly, p(f) = 2^f by a degree-5
// polynomial (relative minimax fit on [-1/2, 1/2]: 9.2e-8 in exact arithmetic, 1.8e-7
// evaluated in fp32, about the 2 ulp of ex2.approx), and n added to p's exponent field as an
// integer. x < -125.5 (n <= -126, where the exponent would leave the normal range) gives
// exactly 0, as -inf does (masked scores): ex2.approx.ftz flushes below 2^-126 too, so the
// two agree there up to terms below 2^-125 of a row maximum's 1. 2^0 is exactly 1.
// Plain C++: the unit test (tests/unit/kernels_cpu/exp2_poly_test.cc) runs it on the host.
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FS_EXP2_HD __host__ __device__ __forceinline__
#else
#define FS_EXP2_HD inline
#endif

namespace flashserve::kernels {

FS_EXP2_HD float exp2_poly(float x) {
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23
  const float xc = x > -127.f ? x : -127.f;  // also maps -inf (and NaN) into range
  const float t = xc + kRound;               // mantissa low bits: round(xc), two's complement
  const float f = xc - (t - kRound);
  float p = 0x1.5bb9f4p-10f;  // fmaf: one rounding a step, the same on host and device
  p = fmaf(p, f, 0x1.3cea80p-7f);
  p = fmaf(p, f, 0x1.c6b752p-5f);
  p = fmaf(p, f, 0x1.ebf9bcp-3f);
  p = fmaf(p, f, 0x1.62e42ap-1f);
  p = fmaf(p, f, 1.f);
  int32_t t_bits, p_bits;
  std::memcpy(&t_bits, &t, sizeof t_bits);
  std::memcpy(&p_bits, &p, sizeof p_bits);
  // (t_bits << 23) == round(xc) << 23 modulo 2^32: the bits above the mantissa shift out.
  const int32_t r_bits = static_cast<int32_t>(static_cast<uint32_t>(p_bits) +
                                              (static_cast<uint32_t>(t_bits) << 23));
  float r;
  std::memcpy(&r, &r_bits, sizeof r);
  return xc < -125.5f ? 0.f : r;
}

}  // namespace flashserve::kernels

#undef FS_EXP2_HD
