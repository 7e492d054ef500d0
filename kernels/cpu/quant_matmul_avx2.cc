// The AVX2 path of the quantized products (quant_matmul.h): one unit (32 elements) per
// 256-bit register, products by vpmaddubsw + vpmaddwd (unsigned weight quants times signed
// activations; Q8_0 by the sign trick, |w| times sign(w) x), the canonical acc[u % 2] as two
// registers per output. Built with its own -mavx2 -mfma -mf16c flags (kernels/CMakeLists.txt)
// and only called when cpu_isa_runs(kAvx2); includes nothing with external inline functions.
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

FS_INLINE __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

FS_INLINE __m256i srl16(__m256i v, int bits) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(bits)); }

// One unit of a weight row: quants (unsigned; Q8_0: signed int8), lane scales, offset.
struct Unit {
  __m256i w;
  __m256 dw;
  float mw;
};

template <int F>
FS_INLINE Unit decode(const uint8_t* row, int64_t u) {
  Unit p;
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  if constexpr (F == kQ8_0 || F == kQ4_0 || F == kQ4_1) {
    constexpr int64_t bb = F == kQ8_0 ? 34 : F == kQ4_0 ? 18 : 20;
    const uint8_t* b = row + u * bb;
    if constexpr (F == kQ8_0) {
      p.w = load32(b + 2);
    } else {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + (F == kQ4_1 ? 4 : 2)));
      p.w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), low4);
    }
    p.dw = _mm256_set1_ps(h2f(b));
    p.mw = F == kQ4_1 ? h2f(b + 2) : 0.f;
    return p;
  } else {
    const uint8_t* b = row + (u / 8) * (F == kQ4_K ? 144 : F == kQ5_K ? 176 : 210);
    const int j = static_cast<int>(u % 8);
    if constexpr (F == kQ6_K) {
      const int n = j / 4, t = j % 4;
      const __m256i lo = _mm256_and_si256(srl16(load32(b + 64 * n + 32 * (t % 2)), 4 * (t / 2)), low4);
      const __m256i hi = _mm256_and_si256(srl16(load32(b + 128 + 32 * n), 2 * t), _mm256_set1_epi8(3));
      p.w = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
      const float d = h2f(b + 208);
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 2 * j;
      p.dw = _mm256_set_m128(_mm_set1_ps(d * static_cast<float>(sc[1])),
                             _mm_set1_ps(d * static_cast<float>(sc[0])));
      p.mw = 0.f;
    } else {
      const uint8_t* qs = b + (F == kQ5_K ? 48 : 16) + 32 * (j / 2);
      p.w = _mm256_and_si256(srl16(load32(qs), 4 * (j % 2)), low4);
      if constexpr (F == kQ5_K) {
        const __m256i h = _mm256_and_si256(srl16(load32(b + 16), j), _mm256_set1_epi8(1));
        p.w = _mm256_or_si256(p.w, _mm256_slli_epi16(h, 4));
      }
      int sc, mn;
      k_scale_min(b + 4, j, &sc, &mn);
      p.dw = _mm256_set1_ps(h2f(b) * static_cast<float>(sc));
      p.mw = -(h2f(b + 2) * static_cast<float>(mn));
    }
    return p;
  }
}

FS_INLINE float reduce(__m256 a0, __m256 a1) {
  const __m256 v = _mm256_add_ps(a0, a1);
  const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
  return _mm_cvtss_f32(_mm_add_ss(h2, _mm_shuffle_ps(h2, h2, 1)));
}

// Outputs (r0 .. r0 + MR, j0 .. j0 + NR).
template <int F, int MR, int NR>
void tile(const MatmulView& p, int r0, int j0) {
  constexpr int kOffsetShift = F == kQ4_0 ? 3 : F == kQ6_K ? 5 : 0;
  constexpr bool kMin = F == kQ4_1 || F == kQ4_K || F == kQ5_K;
  const int64_t units = p.k / 32;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR][NR][2];
  for (auto& a : acc) {
    for (auto& b : a) b[0] = b[1] = _mm256_setzero_ps();
  }
  for (int64_t u = 0; u < units; ++u) {
    Unit w[NR];
    for (int c = 0; c < NR; ++c) w[c] = decode<F>(p.w + (j0 + c) * p.row_bytes, u);
    for (int r = 0; r < MR; ++r) {
      const int64_t lane = ((r0 + r) * units + u) * 8;
      const __m256i x = load32(reinterpret_cast<const uint8_t*>(p.x.q + (r0 + r) * p.k + u * 32));
      const __m256 dx = _mm256_loadu_ps(p.x.dx8 + lane);
      __m256i ls = _mm256_setzero_si256();
      if constexpr (kOffsetShift != 0) {
        ls = _mm256_slli_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.x.lane_sum + lane)), kOffsetShift);
      }
      for (int c = 0; c < NR; ++c) {
        __m256i dot;
        if constexpr (F == kQ8_0) {
          dot = _mm256_maddubs_epi16(_mm256_sign_epi8(w[c].w, w[c].w), _mm256_sign_epi8(x, w[c].w));
        } else {
          dot = _mm256_maddubs_epi16(w[c].w, x);
        }
        dot = _mm256_madd_epi16(dot, ones);
        if constexpr (kOffsetShift != 0) dot = _mm256_sub_epi32(dot, ls);
        __m256& a = acc[r][c][u % 2];
        a = _mm256_fmadd_ps(_mm256_mul_ps(w[c].dw, dx), _mm256_cvtepi32_ps(dot), a);
        if constexpr (kMin) {
          a = _mm256_fmadd_ps(_mm256_set1_ps(w[c].mw), _mm256_loadu_ps(p.x.lane_dsum + lane), a);
        }
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int c = 0; c < NR; ++c) {
      float& y = p.y[(r0 + r) * p.ldy + j0 + c];
      const float d = reduce(acc[r][c][0], acc[r][c][1]);
      y = p.accumulate ? y + d : d;
    }
  }
}

constexpr int kRowChunk = 32;  // activation rows kept in L2 while the weights stream past

template <int F>
void run(const MatmulView& p) {
  const int m = p.x.m;
  if (m < 2) {
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
    for (; j + 2 <= p.n_end; j += 2) {
      int r = c0;
      for (; r + 2 <= c1; r += 2) tile<F, 2, 2>(p, r, j);
      for (; r < c1; ++r) tile<F, 1, 2>(p, r, j);
    }
    for (; j < p.n_end; ++j) {
      for (int r = c0; r < c1; ++r) tile<F, 1, 1>(p, r, j);
    }
  }
}

}  // namespace

void matmul_avx2(const MatmulView& p) {
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
