#pragma once
// exp(x) for the CPU kernels' vector loops (attention's softmax): one formula for a
// float and for 16 lanes, so that a vector body and its scalar tail, every clone of a
// target_clones function and every CPU give the same bits. Include only from files built
// with -ffp-contract=off (kernels/CMakeLists.txt): only +, -, * are used, never contracted.
//
// Cody-Waite reduction x = n ln2 + r (n by the 1.5 * 2^23 rounding trick, ln2 in two parts),
// Cephes' degree-6 polynomial for exp(r) on |r| <= ln2 / 2, times 2^n built in the exponent
// bits. Measured over every float in [-87, 88]: relative error <= 1.4 * 2^-24 (within the
// 1 ulp that glibc's expf promises, which the kernels' tests assume). x < -87 gives 0 (expf
// would give a subnormal < 1.7e-38), x > 88 gives +inf (expf overflows at 88.72), NaN stays
// NaN.
#include <bit>
#include <cstdint>

namespace flashserve::kernels::exp_internal {

// GCC's generic vectors: element-wise IEEE operations, lowered to whatever the target has.
// Used only inside always-inlined helpers (no V16 crosses a call: -Wpsabi's ABI note is moot).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float V16 __attribute__((vector_size(64)));
typedef int32_t V16i __attribute__((vector_size(64)));

#define FS_EXP_INLINE inline __attribute__((always_inline))

template <typename T>
FS_EXP_INLINE T splat(float v) {
  T t = {};
  return t + v;
}

// T = float with I = int32_t, or T = V16 with I = V16i.
template <typename T, typename I>
FS_EXP_INLINE T exp_poly(T x) {
  const T lo = x < -87.f ? splat<T>(-87.f) : (x > 88.f ? splat<T>(88.f) : x);
  const T t = lo * 1.44269504088896341f + 12582912.f;
  const T n = t - 12582912.f;
  const T r = (lo - n * 0.693359375f) - n * -2.12194440e-4f;
  T y = splat<T>(1.9875691500e-4f);
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = (y * (r * r) + r) + 1.f;
  const I bits = (std::bit_cast<I>(t) - std::bit_cast<I>(splat<T>(12582912.f)) + 127) << 23;
  const T e = y * std::bit_cast<T>(bits);
  return x < -87.f ? splat<T>(0.f) : (x > 88.f ? splat<T>(__builtin_inff()) : e);
}

#pragma GCC diagnostic pop

}  // namespace flashserve::kernels::exp_internal
