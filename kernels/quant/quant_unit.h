#pragma once
// One unit (32 consecutive elements of a weight row, kernels/quant/quant_layout.h) as the
// quantized GEMV reads and decodes it: where its words lie in the repacked layout, how they
// turn into int8 quads for dp4a, and how the integer dot products become the fp32 result.
// Host and device code alike (FS_QUANT_HD): the GPU kernel calls these, and the CPU test
// tests/unit/kernels_cpu/quant_test.cc runs the very same functions against the fp32
// reference, so the bit-level decoding is checked on a machine without a GPU.
//
// Activations are quantized like llama.cpp's q8_1 (kernels/cpu/quant.h): per unit an fp32
// scale dx and int8 xq with x^ = dx * xq; sx = dx * sum(xq) and sxlo = dx * sum(xq[0..16)).
// A unit's contribution to y is then, for every format,
//   dx * (a_lo * dot(q[0..4), xq[0..16)) + a_hi * dot(q[4..8), xq[16..32))) + c * sx + e * sxlo
// with q the unsigned (or, Q8_0, signed) quants as int8 quads and a, c, e below; this is the
// exact value of sum(w^ * x^) for the weights w^ the format encodes.
#include <cstdint>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/quant/quant_layout.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define FS_QUANT_UNROLL _Pragma("unroll")
#else
#define FS_QUANT_UNROLL
#endif

namespace flashserve::kernels::quant {

// IEEE binary16 bits -> float, exact (subnormals too).
FS_QUANT_HD float half_bits_to_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
#else
  const uint32_t sign = (bits & 0x8000u) << 16, exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0x1f) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else {
    float f = static_cast<float>(mantissa) * 5.9604644775390625e-8f;  // 2^-24, exact
    return sign != 0 ? -f : f;
  }
  float f;
  std::memcpy(&f, &out, 4);
  return f;
#endif
}

// c + the dot product of four signed bytes of a and b.
FS_QUANT_HD int dp4a(uint32_t a, uint32_t b, int c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(static_cast<int>(a), static_cast<int>(b), c);
#else
  for (int i = 0; i < 4; ++i) {
    c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  }
  return c;
#endif
}

FS_QUANT_HD float bits_to_float(int32_t i) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(i);
#else
  float f;
  std::memcpy(&f, &i, 4);
  return f;
#endif
}
FS_QUANT_HD int32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_int(f);
#else
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i;
#endif
}
// fp32 operations that the device compiler must not contract into an FMA.
FS_QUANT_HD float fmul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FS_QUANT_HD float fadd_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// 1.5 * 2^23: adding it to |v| < 2^22 leaves round-to-nearest-even(v) in the low mantissa
// bits (the float's bits minus kMagicBits); the reverse turns such an int into its float.
inline constexpr float kMagic = 12582912.f;
inline constexpr int32_t kMagicBits = 0x4b400000;

// float(i) for |i| < 2^22 as an integer add and a float add: full-rate pipes, where I2F runs
// at a quarter rate and would bound the m = 8 kernel.
FS_QUANT_HD float small_int_to_float(int i) { return fadd_rn(bits_to_float(i + kMagicBits), -kMagic); }

// The step dx = amax / 127 and its inverse id = 1 / dx (0 for an all-zero unit) of a unit of
// activations whose largest |value| is amax, both correctly rounded (quantize_q8_cpu's).
FS_QUANT_HD void q8_step(float amax, float* dx, float* id) {
#if defined(__CUDA_ARCH__)
  *dx = __fdiv_rn(amax, 127.f);
  *id = *dx > 0.f ? __frcp_rn(*dx) : 0.f;
#else
  *dx = amax / 127.f;
  *id = *dx > 0.f ? 1.f / *dx : 0.f;
#endif
}
// round-to-nearest-even(v * id) through kMagic (|v * id| <= 127 + an ulp).
FS_QUANT_HD int q8_level(float v, float id) {
  return float_to_bits(fadd_rn(fmul_rn(v, id), kMagic)) - kMagicBits;
}

// Quantizes 32 activations as kernels/cpu/quant.h's quantize_q8_cpu: dx, id from q8_step of
// the largest |v|, xq = q8_level(v, id); words[8] the int8 quads, sum and sum_lo (first 16)
// their sums. Each level depends on its own value and amax only, so code that splits a unit
// over lanes (kernels/quant/quant_round.cuh) gets the same levels from the same amax.
FS_QUANT_HD void quantize_unit(const float* v, uint32_t* words, int* sum, int* sum_lo,
                               float* dx) {
  float amax = 0.f;
  FS_QUANT_UNROLL
  for (int i = 0; i < kQuantUnit; ++i) amax = fmaxf(amax, fabsf(v[i]));
  float id = 0.f;
  q8_step(amax, dx, &id);
  *sum = 0;
  FS_QUANT_UNROLL
  for (int w = 0; w < 8; ++w) {
    uint32_t word = 0;
    FS_QUANT_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int q = q8_level(v[4 * w + j], id);
      word |= (static_cast<uint32_t>(q) & 0xffu) << (8 * j);
      *sum += q;
    }
    words[w] = word;
    if (w == 3) *sum_lo = *sum;
  }
}

// Byte offsets, in the repacked tensor, of the fields of unit u of row `row`.
struct UnitOffsets {
  int64_t qs, qs_hi, qh, scale, d;
};
FS_QUANT_HD UnitOffsets unit_offsets(WeightFormat f, const QuantLayout& l, int64_t row,
                                     int64_t u) {
  UnitOffsets o{};
  o.qs = l.qs_offset + row * l.qs_row_bytes + 16 * u;
  o.qs_hi = o.qs + l.qs_row_bytes / 2;  // Q8_0: elements 16-31
  switch (f) {
    case WeightFormat::kQ5_K: o.qh = l.qh_offset + row * l.qh_row_bytes + 4 * u; break;
    case WeightFormat::kQ6_K: o.qh = l.qh_offset + row * l.qh_row_bytes + 8 * u; break;
    default: o.qh = 0;
  }
  switch (f) {
    case WeightFormat::kQ4_1: o.scale = l.scale_offset + row * l.scale_row_bytes + 4 * u; break;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
      o.scale = l.scale_offset + row * l.scale_row_bytes + 16 * (u / 8);
      break;
    default: o.scale = l.scale_offset + row * l.scale_row_bytes + 2 * u; break;
  }
  o.d = l.d_offset + row * l.d_row_bytes + 2 * (u / 8);  // Q6_K
  return o;
}

// The words of one unit as loaded (little-endian): qs[0..4) the 16 bytes at UnitOffsets::qs
// (and, Q8_0, qs[4..8) those at qs_hi); qh[0..2) the 4 (Q5_K) or 8 (Q6_K) bytes at qh;
// sc[0..4) the 16-byte K-quant head (Q4_K, Q5_K), else sc[0] the 2 (Q8_0, Q4_0, Q6_K
// scales) or 4 (Q4_1) bytes at `scale`; Q6_K: sc[1] the fp16 d.
struct UnitRaw {
  uint32_t qs[8];
  uint32_t qh[2];
  uint32_t sc[4];
};

// The decoded unit: q[i] holds elements 4i..4i+3 (i < 4) and 16 + 4(i-4).. (i >= 4).
struct Unit {
  uint32_t q[8];
  float a_lo, a_hi, c, e;
};

// Scale and min of sub-block j (0..7) from ggml's 12 packed bytes (words s0, s1, s2 =
// bytes 0-3, 4-7, 8-11): j < 4: 6 low bits of byte j / j + 4; j >= 4: 4 bits of byte j + 4
// with the 2 top bits of byte j - 4 / j on top.
FS_QUANT_HD void k_scale_min(const uint32_t* head, int j, uint32_t* sc, uint32_t* mn) {
  const int shift = 8 * (j & 3);
  const uint32_t s0 = (head[1] >> shift) & 0xff, s1 = (head[2] >> shift) & 0xff;
  const uint32_t s2 = (head[3] >> shift) & 0xff;
  if (j < 4) {
    *sc = s0 & 63;
    *mn = s1 & 63;
  } else {
    *sc = (s2 & 0xf) | ((s0 >> 6) << 4);
    *mn = (s2 >> 4) | ((s1 >> 6) << 4);
  }
}

template <WeightFormat F>
FS_QUANT_HD Unit decode_unit(const UnitRaw& r, int u) {
  Unit w;
  if constexpr (F == WeightFormat::kQ8_0) {
    FS_QUANT_UNROLL
    for (int i = 0; i < 8; ++i) w.q[i] = r.qs[i];
  } else {
    FS_QUANT_UNROLL
    for (int i = 0; i < 4; ++i) {
      w.q[i] = r.qs[i] & 0x0f0f0f0fu;
      w.q[4 + i] = (r.qs[i] >> 4) & 0x0f0f0f0fu;
    }
  }
  if constexpr (F == WeightFormat::kQ5_K) {  // bit 4 of element 4i + j at byte j, bit i
    FS_QUANT_UNROLL
    for (int i = 0; i < 4; ++i) {
      w.q[i] |= ((r.qh[0] >> i) & 0x01010101u) << 4;
      w.q[4 + i] |= ((r.qh[0] >> (4 + i)) & 0x01010101u) << 4;
    }
  }
  if constexpr (F == WeightFormat::kQ6_K) {  // bits 4-5 at byte j, bits 2i of word h
    FS_QUANT_UNROLL
    for (int i = 0; i < 4; ++i) {
      w.q[i] |= ((r.qh[0] >> (2 * i)) & 0x03030303u) << 4;
      w.q[4 + i] |= ((r.qh[1] >> (2 * i)) & 0x03030303u) << 4;
    }
  }
  w.e = 0.f;
  if constexpr (F == WeightFormat::kQ8_0 || F == WeightFormat::kQ4_0) {
    const float d = half_bits_to_float(r.sc[0]);
    w.a_lo = w.a_hi = d;
    w.c = F == WeightFormat::kQ4_0 ? -8.f * d : 0.f;
  } else if constexpr (F == WeightFormat::kQ4_1) {
    w.a_lo = w.a_hi = half_bits_to_float(r.sc[0]);
    w.c = half_bits_to_float(r.sc[0] >> 16);
  } else if constexpr (F == WeightFormat::kQ4_K || F == WeightFormat::kQ5_K) {
    uint32_t sc, mn;
    k_scale_min(r.sc, u & 7, &sc, &mn);
    // d * sc and dmin * mn are exact in fp32 (11 + 6 significant bits).
    w.a_lo = w.a_hi = half_bits_to_float(r.sc[0]) * static_cast<float>(sc);
    w.c = -(half_bits_to_float(r.sc[0] >> 16) * static_cast<float>(mn));
  } else {  // Q6_K: (d sc) (q - 32) with an int8 scale per 16 elements; d sc exact in fp32
    const float d = half_bits_to_float(r.sc[1]);
    w.a_lo = d * static_cast<float>(static_cast<int8_t>(r.sc[0] & 0xff));
    w.a_hi = d * static_cast<float>(static_cast<int8_t>((r.sc[0] >> 8) & 0xff));
    // -32 (a_lo sxlo + a_hi (sx - sxlo))
    w.c = -32.f * w.a_hi;
    w.e = -32.f * (w.a_lo - w.a_hi);
  }
  return w;
}

// acc + the unit's contribution (see the top of this file) for activations xlo (elements
// 0-15 as four int8 quads), xhi (16-31) and their scale / sums.
template <WeightFormat F>
FS_QUANT_HD float unit_dot(const Unit& w, const uint32_t* xlo, const uint32_t* xhi, float dx,
                           float sx, float sxlo, float acc) {
  int lo = 0, hi = 0;
  FS_QUANT_UNROLL
  for (int i = 0; i < 4; ++i) {
    lo = dp4a(w.q[i], xlo[i], lo);
    hi = dp4a(w.q[4 + i], xhi[i], hi);
  }
  if constexpr (F == WeightFormat::kQ6_K) {
    acc += dx * (w.a_lo * small_int_to_float(lo) + w.a_hi * small_int_to_float(hi));
    acc += w.e * sxlo;
  } else {
    acc += dx * w.a_lo * small_int_to_float(lo + hi);
  }
  if constexpr (F != WeightFormat::kQ8_0) acc += w.c * sx;
  return acc;
}

// ggml's fp32 value of element e (0..31) of a decoded unit, with ggml's operations in
// ggml's order (no contraction on the device), for the dequantization to bf16. The quant
// becomes a float through small_int_to_float (exact, full-rate pipes): the GEMM of
// kernels/quant/quant_gemm.cu decodes every weight element of a tile this way.
template <WeightFormat F>
FS_QUANT_HD float unit_element(const Unit& w, int e) {
  const uint32_t byte = (w.q[e / 4] >> (8 * (e % 4))) & 0xffu;
  if constexpr (F == WeightFormat::kQ8_0) {
    return fmul_rn(small_int_to_float(static_cast<int8_t>(byte)), w.a_lo);
  } else if constexpr (F == WeightFormat::kQ4_0) {
    return fmul_rn(small_int_to_float(static_cast<int>(byte) - 8), w.a_lo);
  } else if constexpr (F == WeightFormat::kQ4_1) {  // q d + m
    return fadd_rn(fmul_rn(small_int_to_float(static_cast<int>(byte)), w.a_lo), w.c);
  } else if constexpr (F == WeightFormat::kQ6_K) {  // (d sc) (q - 32), exact
    return fmul_rn(e < 16 ? w.a_lo : w.a_hi, small_int_to_float(static_cast<int>(byte) - 32));
  } else {  // Q4_K, Q5_K: (d sc) q - (dmin mn); c = -(dmin mn)
    return fadd_rn(fmul_rn(w.a_lo, small_int_to_float(static_cast<int>(byte))), w.c);
  }
}

}  // namespace flashserve::kernels::quant

namespace flashserve::kernels::quant {

template <WeightFormat F>
using FormatTag = std::integral_constant<WeightFormat, F>;

// fn(FormatTag<F>{}) for the quantized format f (not bf16): the one list of quantized
// formats every launcher and test dispatches over.
template <typename Fn>
decltype(auto) dispatch_quant_format(WeightFormat f, Fn&& fn) {
  switch (f) {
    case WeightFormat::kQ8_0: return fn(FormatTag<WeightFormat::kQ8_0>{});
    case WeightFormat::kQ4_0: return fn(FormatTag<WeightFormat::kQ4_0>{});
    case WeightFormat::kQ4_1: return fn(FormatTag<WeightFormat::kQ4_1>{});
    case WeightFormat::kQ4_K: return fn(FormatTag<WeightFormat::kQ4_K>{});
    case WeightFormat::kQ5_K: return fn(FormatTag<WeightFormat::kQ5_K>{});
    default: return fn(FormatTag<WeightFormat::kQ6_K>{});
  }
}

inline constexpr WeightFormat kQuantFormats[] = {WeightFormat::kQ8_0, WeightFormat::kQ4_0,
                                                 WeightFormat::kQ4_1, WeightFormat::kQ4_K,
                                                 WeightFormat::kQ5_K, WeightFormat::kQ6_K};

}  // namespace flashserve::kernels::quant
