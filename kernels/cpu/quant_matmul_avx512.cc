// The AVX-512 VNNI path of the quantized products (quant_matmul.h): two units (64 elements)
// per 512-bit register, unit u in lanes 0-7 (acc[0] of the canonical order: u even) and
// unit u + 1 in lanes 8-15 (acc[1]), products by vpdpbusd (unsigned weight quants times
// signed activations; the signed formats' offsets come back out through the lanes' sums of
// activations). Built with its own -mavx512* flags (kernels/CMakeLists.txt) and only called
// when cpu_isa_runs(kAvx512); includes nothing with external inline functions.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/quant_matmul_internal.h"

namespace flashserve::kernels::qmm {
namespace {

// Every helper is inlined into the tiles (a call per unit costs more than the unit).
#define FS_INLINE inline __attribute__((always_inline))

FS_INLINE float h2f(const uint8_t* p) {
  return _cvtsh_ss(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

FS_INLINE __m512 halves(float lo, float hi) {
  return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

// [a.lo | a.hi | b.lo | b.hi]: the low then high nibbles of 16 bytes at a, then at b.
FS_INLINE __m512i nibbles_pair(const uint8_t* a, const uint8_t* b) {
  const __m256i ab = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(b),
                                         reinterpret_cast<const __m128i*>(a));
  __m512i z = _mm512_castsi256_si512(ab);
  z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 1, 0, 0));
  z = _mm512_srlv_epi64(z, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0));
  return _mm512_and_si512(z, _mm512_set1_epi8(0x0f));
}

// 32 bytes at p twice, the first copy shifted right by s0 bits, the second by s1 (per 64-bit
// word: callers mask to the bits they want).
FS_INLINE __m512i twice_shifted(const uint8_t* p, int s0, int s1) {
  const __m512i z = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_srlv_epi64(z, _mm512_set_epi64(s1, s1, s1, s1, s0, s0, s0, s0));
}

// Two units u, u + 1 (u even) of a weight row: unsigned quants (Q8_0: int8 + 128), lane
// scales dw and offsets mw. `single`: only unit u exists (lanes 8-15 are then ignored).
struct Pair {
  __m512i w;
  __m512 dw, mw;
};

template <int F>
FS_INLINE Pair decode(const uint8_t* row, int64_t u, bool single) {
  Pair p;
  if constexpr (F == kQ8_0 || F == kQ4_0 || F == kQ4_1) {
    constexpr int64_t bb = F == kQ8_0 ? 34 : F == kQ4_0 ? 18 : 20;
    const uint8_t* a = row + u * bb;
    const uint8_t* b = single ? a : a + bb;
    if constexpr (F == kQ8_0) {
      const __m512i z = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 2))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), 1);
      p.w = _mm512_xor_si512(z, _mm512_set1_epi8(static_cast<char>(0x80)));
    } else {
      constexpr int qs = F == kQ4_1 ? 4 : 2;
      p.w = nibbles_pair(a + qs, b + qs);
    }
    p.dw = halves(h2f(a), h2f(b));
    if constexpr (F == kQ4_1) p.mw = halves(h2f(a + 2), h2f(b + 2));
    return p;
  } else {
    const uint8_t* b = row + (u / 8) * (F == kQ4_K ? 144 : F == kQ5_K ? 176 : 210);
    const int j = static_cast<int>(u % 8);
    if constexpr (F == kQ6_K) {
      const int n = j / 4, t = j % 4;
      const __m512i lo4 = _mm512_srli_epi64(
          _mm512_loadu_si512(b + 64 * n), 4 * (t / 2));
      const __m512i hi2 = twice_shifted(b + 128 + 32 * n, 2 * t, 2 * t + 2);
      p.w = _mm512_or_si512(_mm512_and_si512(lo4, _mm512_set1_epi8(0x0f)),
                            _mm512_slli_epi16(_mm512_and_si512(hi2, _mm512_set1_epi8(3)), 4));
      const float d = h2f(b + 208);
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 2 * j;
      const __m256 lo = _mm256_set_m128(_mm_set1_ps(d * static_cast<float>(sc[1])),
                                        _mm_set1_ps(d * static_cast<float>(sc[0])));
      const __m256 hi = _mm256_set_m128(_mm_set1_ps(d * static_cast<float>(sc[3])),
                                        _mm_set1_ps(d * static_cast<float>(sc[2])));
      p.dw = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    } else {
      const uint8_t* qs = b + (F == kQ5_K ? 48 : 16) + 32 * (j / 2);
      p.w = _mm512_and_si512(twice_shifted(qs, 0, 4), _mm512_set1_epi8(0x0f));
      if constexpr (F == kQ5_K) {
        const __m512i h = _mm512_and_si512(twice_shifted(b + 16, j, j + 1), _mm512_set1_epi8(1));
        p.w = _mm512_or_si512(p.w, _mm512_slli_epi16(h, 4));
      }
      int sc0, mn0, sc1, mn1;
      k_scale_min(b + 4, j, &sc0, &mn0);
      k_scale_min(b + 4, j + 1, &sc1, &mn1);
      const float d = h2f(b), dmin = h2f(b + 2);
      p.dw = halves(d * static_cast<float>(sc0), d * static_cast<float>(sc1));
      p.mw = halves(-(dmin * static_cast<float>(mn0)), -(dmin * static_cast<float>(mn1)));
    }
    return p;
  }
}

FS_INLINE float reduce(__m512 acc) {
  const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
  const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}

// Outputs (r0 .. r0 + MR, j0 .. j0 + NR).
template <int F, int MR, int NR>
void tile(const MatmulView& p, int r0, int j0) {
  constexpr int kOffsetShift = F == kQ8_0 ? 7 : F == kQ4_0 ? 3 : F == kQ6_K ? 5 : 0;
  constexpr bool kMin = F == kQ4_1 || F == kQ4_K || F == kQ5_K;
  const int64_t units = p.k / 32;
  __m512 acc[MR][NR];
  for (auto& a : acc) {
    for (__m512& v : a) v = _mm512_setzero_ps();
  }
  for (int64_t u = 0; u < units; u += 2) {
    const bool single = u + 1 == units;
    const __mmask16 mask = single ? 0x00ff : 0xffff;
    Pair w[NR];
    for (int c = 0; c < NR; ++c) w[c] = decode<F>(p.w + (j0 + c) * p.row_bytes, u, single);
    for (int r = 0; r < MR; ++r) {
      const int64_t lane = ((r0 + r) * units + u) * 8;
      const int8_t* xq = p.x.q + (r0 + r) * p.k + u * 32;
      const __m512i x = single ? _mm512_castsi256_si512(_mm256_loadu_si256(
                                     reinterpret_cast<const __m256i*>(xq)))
                               : _mm512_loadu_si512(xq);
      const __m512 dx = _mm512_maskz_loadu_ps(mask, p.x.dx8 + lane);
      __m512i ls = _mm512_setzero_si512();
      if constexpr (kOffsetShift != 0) {
        ls = _mm512_slli_epi32(_mm512_maskz_loadu_epi32(mask, p.x.lane_sum + lane), kOffsetShift);
      }
      __m512 sf = _mm512_setzero_ps();
      if constexpr (kMin) sf = _mm512_maskz_loadu_ps(mask, p.x.lane_dsum + lane);
      for (int c = 0; c < NR; ++c) {
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[c].w, x);
        if constexpr (kOffsetShift != 0) dot = _mm512_sub_epi32(dot, ls);
        acc[r][c] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(w[c].dw, dx), _mm512_cvtepi32_ps(dot),
                                          acc[r][c], mask);
        if constexpr (kMin) {
          acc[r][c] = _mm512_mask3_fmadd_ps(w[c].mw, sf, acc[r][c], mask);
        }
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) {
      float& y = p.y[(r0 + r) * p.ldy + j0 + c];
      const float d = reduce(acc[r][c]);
      y = p.accumulate ? y + d : d;
    }
  }
}

// Activation rows in chunks that stay in L2 while the weights stream past them; in a chunk,
// tiles of 4 rows x 2 weight rows (one row x 4 weight rows when m < 4, i.e. decode).
constexpr int kRowChunk = 32;

template <int F>
void run(const MatmulView& p) {
  const int m = p.x.m;
  if (m < 4) {
    for (int r = 0; r < m; ++r) {
      int j = p.n_begin;
      for (; j + 4 <= p.n_end; j += 4) tile<F, 1, 4>(p, r, j);
      for (; j < p.n_end; ++j) tile<F, 1, 1>(p, r, j);
    }
    return;
  }
  for (int c0 = 0; c0 < m; c0 += kRowChunk) {
    const int c1 = c0 + kRowChunk < m ? c0 + kRowChunk : m;
    int j = p.n_begin;
    for (; j + 4 <= p.n_end; j += 4) {
      int r = c0;
      for (; r + 4 <= c1; r += 4) tile<F, 4, 4>(p, r, j);
      for (; r < c1; ++r) tile<F, 1, 4>(p, r, j);
    }
    for (; j < p.n_end; ++j) {
      int r = c0;
      for (; r + 4 <= c1; r += 4) tile<F, 4, 1>(p, r, j);
      for (; r < c1; ++r) tile<F, 1, 1>(p, r, j);
    }
  }
}

}  // namespace

// quantize_q8_cpu's operations (kernels/cpu/quant.cc) on 16 lanes: the max of |x| is exact,
// amax / 127 and 1 / dx are IEEE divisions, and vcvtps2dq rounds to nearest even (the
// default MXCSR mode, as nearbyint); the lane sums come from vpdpbusd with ones.
void quantize_rows_avx512(const QuantizeView& v, int r0, int r1) {
  const int64_t units = v.k / 32;
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t u = 0; u < units; ++u) {
      const float* x = v.x + r * v.k + u * 32;
      const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
      const float amax = _mm512_reduce_max_ps(
          _mm512_max_ps(_mm512_and_ps(a, abs_mask), _mm512_and_ps(b, abs_mask)));
      const float dx = amax / 127.f;
      const float id = dx > 0 ? 1.f / dx : 0.f;
      const __m512 vid = _mm512_set1_ps(id);
      const __m128i qa = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(a, vid)));
      const __m128i qb = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(b, vid)));
      const __m256i q = _mm256_set_m128i(qb, qa);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(v.q + r * v.k + u * 32), q);
      const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), q);
      const int64_t lane = (r * units + u) * 8;
      const __m256 vdx = _mm256_set1_ps(dx);
      _mm256_storeu_ps(v.dx8 + lane, vdx);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(v.lane_sum + lane), sums);
      _mm256_storeu_ps(v.lane_dsum + lane, _mm256_mul_ps(vdx, _mm256_cvtepi32_ps(sums)));
    }
  }
}

void matmul_avx512(const MatmulView& p) {
  switch (p.format) {
    case kQ8_0: return run<kQ8_0>(p);
    case kQ4_0: return run<kQ4_0>(p);
    case kQ4_1: return run<kQ4_1>(p);
    case kQ4_K: return run<kQ4_K>(p);
    case kQ5_K: return run<kQ5_K>(p);
    default: return run<kQ6_K>(p);
  }
}

}  // namespace flashserve::kernels::qmm
