// Encoders of the K-quants (Q2_K ... Q6_K) and the IQ4 types (IQ4_NL, IQ4_XS), without an
// importance matrix (see model/gguf/quantize.h). Our own search, in the spirit of ggml's
// make_qkx2_quants / make_qx_quants: for each sub-block, a few candidate scales around the
// one that maps the extreme value onto the extreme level, each followed by the weighted
// least-squares refit of scale (and min) given the levels it chose; the best candidate
// wins. The sub-block scales are then quantized against the super-block's fp16 scale(s),
// and every element is re-quantized against its final (decoded) sub-block scale, so the
// encoding is exactly what a decoder reproduces. Byte layouts: quant_blocks.h.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "model/gguf/dequant.h"
#include "model/gguf/quant_blocks.h"
#include "model/gguf/quantize.h"
#include "model/gguf/quantize_internal.h"

namespace flashserve::model::quant_internal {
namespace {

using blocks::kQK;

constexpr int kNumTries = 6;  // candidate scales on each side of the extreme-value one

// Round to nearest, ties to even, without a libm call: adding 1.5 * 2^23 leaves the
// rounded integer in the low mantissa bits (exact for |v| < 2^22; v is clamped first, and
// every caller clamps the result to its level range).
int nearest(float v) {
  v = std::min(std::max(v, -4194304.f), 4194304.f);
  const float shifted = v + 12582912.f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007FFFFF) - 0x00400000;
}
int clampi(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }

// Sub-block fit x ~= scale * q - min with q in [0, nmax], scale >= 0, min >= 0 (the range
// always includes 0, as in ggml). Returns {scale, min}; fills q.
struct Affine {
  float scale = 0, min = 0;
};

Affine fit_affine(const float* x, const float* w, int n, int nmax, uint8_t* q) {
  float lo = 0, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (!(hi > lo)) {
    std::fill(q, q + n, 0);
    return {0.f, -lo};
  }
  Affine best{(hi - lo) / nmax, -lo};
  double best_err = std::numeric_limits<double>::infinity();
  uint8_t trial[kQK];
  double sw = 0, sx = 0, sxx = 0;  // the sums that do not depend on the levels
  for (int i = 0; i < n; ++i) {
    sw += w[i];
    sx += static_cast<double>(w[i]) * x[i];
    sxx += static_cast<double>(w[i]) * x[i] * x[i];
  }
  for (int t = -kNumTries; t <= kNumTries; ++t) {
    const float iscale = (nmax + 0.15f * t) / (hi - lo);
    double sq = 0, sqq = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      trial[i] = static_cast<uint8_t>(clampi(nearest(iscale * (x[i] - lo)), 0, nmax));
      const double wq = static_cast<double>(w[i]) * trial[i];
      sq += wq;
      sqq += wq * trial[i];
      sqx += wq * x[i];
    }
    const double det = sw * sqq - sq * sq;
    double a = 0, b = 0;  // x ~= a q + b
    if (det > 0) {
      a = (sw * sqx - sq * sx) / det;
      b = (sqq * sx - sq * sqx) / det;
    }
    if (b > 0 && sqq > 0) {
      b = 0;
      a = sqx / sqq;
    }
    if (!(a > 0)) continue;
    // sum w (a q + b - x)^2, expanded into the sums above (no second pass over the values).
    const double err = a * a * sqq + 2 * a * b * sq + b * b * sw - 2 * a * sqx - 2 * b * sx + sxx;
    if (err < best_err) {
      best_err = err;
      best = {static_cast<float>(a), static_cast<float>(-b)};
      std::memcpy(q, trial, n);
    }
  }
  if (std::isinf(best_err)) {
    const float iscale = nmax / (hi - lo);
    for (int i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(clampi(nearest(iscale * (x[i] - lo)), 0, nmax));
  }
  return best;
}

// A grid of levels, ascending: an integer range (Q3_K [-4, 3], Q6_K [-32, 31]), where the
// nearest level is a rounding, or the IQ4 grid, where it is the number of midpoints below
// the value (a value on a midpoint goes to the lower level).
struct Grid {
  int num_levels = 0;
  bool uniform = false;
  float levels[64] = {};
  float mids[63] = {};

  static Grid integers(int lo, int hi) {
    Grid g;
    g.num_levels = hi - lo + 1;
    g.uniform = true;
    for (int i = 0; i < g.num_levels; ++i) g.levels[i] = static_cast<float>(lo + i);
    return g;
  }
  static Grid iq4() {
    Grid g;
    g.num_levels = 16;
    for (int i = 0; i < 16; ++i) g.levels[i] = blocks::kIq4Values[i];
    for (int i = 0; i < 15; ++i) g.mids[i] = 0.5f * (g.levels[i] + g.levels[i + 1]);
    return g;
  }
  int index(float v) const {
    if (uniform) return clampi(nearest(v) - static_cast<int>(levels[0]), 0, num_levels - 1);
    int k = 0;
    for (int i = 0; i + 1 < num_levels; ++i) k += v > mids[i] ? 1 : 0;
    return k;
  }
};

const Grid kQ3Grid = Grid::integers(-4, 3);
const Grid kQ6Grid = Grid::integers(-32, 31);
const Grid kIq4Grid = Grid::iq4();

// Sub-block fit x ~= scale * grid.levels[index]: `extreme` the level the value of largest
// magnitude maps to in the first candidate (-32 for Q6_K, -127 for the IQ4 grid), `step`
// the spacing of the other candidates in level units. Returns the (signed) scale.
float fit_symmetric(const float* x, const float* w, int n, const Grid& grid, float extreme, float step) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0) return 0.f;
  float best_scale = max / extreme;
  double best_score = -1;
  for (int t = -kNumTries; t <= kNumTries; ++t) {
    const float iscale = (extreme + step * t) / max;
    double sqx = 0, sqq = 0;
    for (int i = 0; i < n; ++i) {
      const float level = grid.levels[grid.index(iscale * x[i])];
      sqx += w[i] * level * x[i];
      sqq += w[i] * level * level;
    }
    // The refit scale sqx / sqq lowers the weighted error by sqx^2 / sqq: maximize that.
    if (sqq > 0 && sqx * sqx / sqq > best_score) {
      best_score = sqx * sqx / sqq;
      best_scale = static_cast<float>(sqx / sqq);
    }
  }
  return best_scale;
}

// Weights of the affine fits: |x| plus the super-block's rms (as ggml's Q4_K reference).
void affine_weights(const float* x, int n, float* w) {
  double sum_x2 = 0;
  for (int i = 0; i < n; ++i) sum_x2 += static_cast<double>(x[i]) * x[i];
  const float rms = static_cast<float>(std::sqrt(sum_x2 / n));
  for (int i = 0; i < n; ++i) w[i] = rms + std::fabs(x[i]);
}

// Weights of the symmetric fits: x^2 (large values matter most), plus a floor so that an
// all-tiny sub-block still has a fit.
void square_weights(const float* x, int n, float* w) {
  for (int i = 0; i < n; ++i) w[i] = x[i] * x[i] + 1e-30f;
}

// Super-block scale for sub-block scales quantized to integers in [lo, hi] (lo < 0 for
// signed ones): the value of largest magnitude maps to lo if signed, else to hi. Returns
// the decoded fp16 scale and stores its bits.
float super_scale(const float* sub, int n, int lo, int hi, uint8_t* out_fp16) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(sub[i]) > amax) {
      amax = std::fabs(sub[i]);
      max = sub[i];
    }
  }
  const float d = amax == 0 ? 0.f : (lo < 0 ? max / static_cast<float>(lo) : max / static_cast<float>(hi));
  uint16_t bits = fp32_to_fp16(d);
  // A scale below half of fp16's smallest subnormal would round to 0 and zero the block:
  // keep the smallest subnormal instead (the integer sub-block scales then clamp, and the
  // block keeps its largest values' order of magnitude).
  if (d != 0 && (bits & 0x7FFF) == 0) bits |= 1;
  blocks::store_u16(out_fp16, bits);
  return fp16_to_fp32(bits);
}

int quantize_scale(float value, float d, int lo, int hi) {
  return d == 0 ? 0 : clampi(nearest(value / d), lo, hi);
}

// Affine super-block (Q2_K, Q4_K, Q5_K): sub-blocks of `sub` elements, levels [0, nmax],
// scales and mins quantized to [0, scale_max] against fp16 d and dmin. Fills q (one level
// per element), the integer scales and mins, and the two fp16 fields.
void affine_super_block(const float* x, int sub, int nmax, int scale_max, uint8_t* q, int* scales, int* mins,
                        uint8_t* d_out, uint8_t* dmin_out) {
  const int num_sub = kQK / sub;
  float w[kQK], sub_scale[16], sub_min[16];
  affine_weights(x, kQK, w);
  for (int s = 0; s < num_sub; ++s) {
    const Affine f = fit_affine(x + s * sub, w + s * sub, sub, nmax, q + s * sub);
    sub_scale[s] = f.scale;
    sub_min[s] = f.min;
  }
  const float d = super_scale(sub_scale, num_sub, 0, scale_max, d_out);
  const float dmin = super_scale(sub_min, num_sub, 0, scale_max, dmin_out);
  for (int s = 0; s < num_sub; ++s) {
    scales[s] = quantize_scale(sub_scale[s], d, 0, scale_max);
    mins[s] = quantize_scale(sub_min[s], dmin, 0, scale_max);
    const float dl = d * static_cast<float>(scales[s]);
    const float ml = dmin * static_cast<float>(mins[s]);
    for (int i = s * sub; i < (s + 1) * sub; ++i) {
      q[i] = dl == 0 ? 0 : static_cast<uint8_t>(clampi(nearest((x[i] + ml) / dl), 0, nmax));
    }
  }
}

// Symmetric super-block on an integer grid [lo, hi] (Q3_K: [-4, 3], Q6_K: [-32, 31]):
// sub-blocks of 16, signed sub-block scales in [scale_lo, scale_hi] against one fp16 d.
// Fills q (level - lo, i.e. in [0, hi - lo]) and the integer scales.
void symmetric_super_block(const float* x, const Grid& grid, float step, int scale_lo, int scale_hi, uint8_t* q,
                           int* scales, uint8_t* d_out) {
  constexpr int kSub = 16;
  const int lo = static_cast<int>(grid.levels[0]);
  float w[kQK], sub_scale[kQK / kSub];
  square_weights(x, kQK, w);
  for (int s = 0; s < kQK / kSub; ++s) {
    sub_scale[s] = fit_symmetric(x + s * kSub, w + s * kSub, kSub, grid, static_cast<float>(lo), step);
  }
  const float d = super_scale(sub_scale, kQK / kSub, scale_lo, scale_hi, d_out);
  for (int s = 0; s < kQK / kSub; ++s) {
    scales[s] = quantize_scale(sub_scale[s], d, scale_lo, scale_hi);
    const float dl = d * static_cast<float>(scales[s]);
    for (int i = s * kSub; i < (s + 1) * kSub; ++i) {
      q[i] = static_cast<uint8_t>(dl == 0 ? -lo : grid.index(x[i] / dl));
    }
  }
}

// The index of the IQ4 level nearest to x / dl.
uint8_t iq4_index(float x, float dl) {
  return static_cast<uint8_t>(kIq4Grid.index(dl == 0 ? 0.f : x / dl));
}

// Q4_K / Q5_K: eight 6-bit scales and mins into 12 bytes (the inverse of
// blocks::unpack_k_scale_min).
void pack_k_scale_min(const int* scales, const int* mins, uint8_t* p) {
  for (int j = 0; j < 4; ++j) {
    p[j] = static_cast<uint8_t>(scales[j] | ((scales[j + 4] >> 4) << 6));
    p[j + 4] = static_cast<uint8_t>(mins[j] | ((mins[j + 4] >> 4) << 6));
    p[j + 8] = static_cast<uint8_t>((scales[j + 4] & 0x0F) | ((mins[j + 4] & 0x0F) << 4));
  }
}

}  // namespace

void encode_q2_k_block(const float* x, uint8_t* out) {
  std::memset(out, 0, blocks::kQ2_KBytes);
  uint8_t q[kQK];
  int scales[16], mins[16];
  affine_super_block(x, 16, 3, 15, q, scales, mins, out + 80, out + 82);
  for (int s = 0; s < 16; ++s) out[s] = static_cast<uint8_t>(scales[s] | (mins[s] << 4));
  uint8_t* qs = out + 16;
  for (int e = 0; e < kQK; ++e) qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>(q[e] << (2 * ((e / 32) % 4)));
}

void encode_q3_k_block(const float* x, uint8_t* out) {
  std::memset(out, 0, blocks::kQ3_KBytes);
  uint8_t q[kQK];  // level + 4, in [0, 7]
  int scales[16];
  symmetric_super_block(x, kQ3Grid, 0.1f, -32, 31, q, scales, out + 108);
  uint8_t* hmask = out;
  uint8_t* qs = out + 32;
  uint8_t* packed = out + 96;
  for (int e = 0; e < kQK; ++e) {
    qs[32 * (e / 128) + e % 32] |= static_cast<uint8_t>((q[e] & 3) << (2 * ((e / 32) % 4)));
    hmask[e % 32] |= static_cast<uint8_t>((q[e] >> 2) << (e / 32));
  }
  for (int s = 0; s < 16; ++s) {
    const int u = scales[s] + 32;
    packed[s % 8] |= static_cast<uint8_t>((u & 0x0F) << (s < 8 ? 0 : 4));
    packed[8 + s % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (s / 4)));
  }
}

void encode_q4_k_block(const float* x, uint8_t* out) {
  std::memset(out, 0, blocks::kQ4_KBytes);
  uint8_t q[kQK];
  int scales[8], mins[8];
  affine_super_block(x, 32, 15, 63, q, scales, mins, out, out + 2);
  pack_k_scale_min(scales, mins, out + 4);
  uint8_t* qs = out + 16;
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) qs[32 * (s / 2) + l] |= static_cast<uint8_t>(q[32 * s + l] << (4 * (s % 2)));
  }
}

void encode_q5_k_block(const float* x, uint8_t* out) {
  std::memset(out, 0, blocks::kQ5_KBytes);
  uint8_t q[kQK];
  int scales[8], mins[8];
  affine_super_block(x, 32, 31, 63, q, scales, mins, out, out + 2);
  pack_k_scale_min(scales, mins, out + 4);
  uint8_t* qh = out + 16;
  uint8_t* qs = out + 48;
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t v = q[32 * s + l];
      qs[32 * (s / 2) + l] |= static_cast<uint8_t>((v & 0x0F) << (4 * (s % 2)));
      qh[l] |= static_cast<uint8_t>((v >> 4) << s);
    }
  }
}

void encode_q6_k_block(const float* x, uint8_t* out) {
  std::memset(out, 0, blocks::kQ6_KBytes);
  uint8_t q[kQK];  // level + 32, in [0, 63]
  int scales[16];
  symmetric_super_block(x, kQ6Grid, 0.15f, -128, 127, q, scales, out + 208);
  uint8_t* ql = out;
  uint8_t* qh = out + 128;
  for (int s = 0; s < 16; ++s) out[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(scales[s]));
  for (int e = 0; e < kQK; ++e) {
    const int h = e / 128, k = (e / 32) % 4, l = e % 32;
    ql[64 * h + 32 * (k % 2) + l] |= static_cast<uint8_t>((q[e] & 0x0F) << (4 * (k / 2)));
    qh[32 * h + l] |= static_cast<uint8_t>((q[e] >> 4) << (2 * k));
  }
}

void encode_iq4_nl_block(const float* x, uint8_t* out) {
  constexpr int kN = blocks::kQ32;
  float w[kN];
  square_weights(x, kN, w);
  const float scale = fit_symmetric(x, w, kN, kIq4Grid, -127.f, 1.f);
  const uint16_t bits = fp32_to_fp16(scale);
  blocks::store_u16(out, bits);
  const float d = fp16_to_fp32(bits);
  for (int j = 0; j < kN / 2; ++j) {
    out[2 + j] = static_cast<uint8_t>(iq4_index(x[j], d) | (iq4_index(x[j + kN / 2], d) << 4));
  }
}

void encode_iq4_xs_block(const float* x, uint8_t* out) {
  std::memset(out, 0, blocks::kIQ4_XSBytes);
  float w[kQK], sub_scale[8];
  square_weights(x, kQK, w);
  for (int s = 0; s < 8; ++s) {
    sub_scale[s] = fit_symmetric(x + 32 * s, w + 32 * s, 32, kIq4Grid, -127.f, 1.f);
  }
  const float d = super_scale(sub_scale, 8, -32, 31, out);
  uint16_t scales_h = 0;
  uint8_t* scales_l = out + 4;
  uint8_t* qs = out + 8;
  for (int s = 0; s < 8; ++s) {
    const int ls = quantize_scale(sub_scale[s], d, -32, 31);
    const int u = ls + 32;
    scales_l[s / 2] |= static_cast<uint8_t>((u & 0x0F) << (4 * (s % 2)));
    scales_h |= static_cast<uint16_t>((u >> 4) << (2 * s));
    const float dl = d * static_cast<float>(ls);
    for (int j = 0; j < 16; ++j) {
      qs[16 * s + j] = static_cast<uint8_t>(iq4_index(x[32 * s + j], dl) | (iq4_index(x[32 * s + 16 + j], dl) << 4));
    }
  }
  blocks::store_u16(out + 2, scales_h);
}

}  // namespace flashserve::model::quant_internal
