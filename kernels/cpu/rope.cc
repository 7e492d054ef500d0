#include "kernels/cpu/rope.h"

#include <cmath>
#include <vector>

namespace flashserve::kernels {
namespace {

// Element indices of pair i within a head.
struct PairIndex {
  int a, b;
};

PairIndex pair_index(RopeStyle style, int i, int half) {
  return style == RopeStyle::kAdjacentPairs ? PairIndex{2 * i, 2 * i + 1}
                                            : PairIndex{i, i + half};
}

}  // namespace

void rope_cos_sin_cpu(const int32_t* positions, int num_tokens, int head_dim, float theta_base,
                      float* cos, float* sin, const float* freq_factors) {
  const int half = head_dim / 2;
  std::vector<double> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = std::pow(static_cast<double>(theta_base), -2.0 * i / head_dim);
    if (freq_factors != nullptr) inv_freq[i] /= freq_factors[i];
  }
  for (int t = 0; t < num_tokens; ++t) {
    const double pos = positions[t];
    for (int i = 0; i < half; ++i) {
      const double angle = pos * inv_freq[i];
      cos[static_cast<int64_t>(t) * half + i] = static_cast<float>(std::cos(angle));
      sin[static_cast<int64_t>(t) * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void rope_apply_cpu(float* x, int num_tokens, int num_heads, int head_dim, const float* cos,
                    const float* sin, RopeStyle style) {
  const int half = head_dim / 2;
  for (int t = 0; t < num_tokens; ++t) {
    const float* c = cos + static_cast<int64_t>(t) * half;
    const float* s = sin + static_cast<int64_t>(t) * half;
    for (int h = 0; h < num_heads; ++h) {
      float* head = x + (static_cast<int64_t>(t) * num_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const PairIndex p = pair_index(style, i, half);
        const float a = head[p.a], b = head[p.b];
        head[p.a] = a * c[i] - b * s[i];
        head[p.b] = a * s[i] + b * c[i];
      }
    }
  }
}

void rope_cpu(float* q, float* k, const int32_t* positions, int num_tokens, int num_heads,
              int num_kv_heads, int head_dim, float theta_base, RopeStyle style) {
  const size_t table = static_cast<size_t>(num_tokens) * (head_dim / 2);
  std::vector<float> cos(table), sin(table);
  rope_cos_sin_cpu(positions, num_tokens, head_dim, theta_base, cos.data(), sin.data());
  rope_apply_cpu(q, num_tokens, num_heads, head_dim, cos.data(), sin.data(), style);
  rope_apply_cpu(k, num_tokens, num_kv_heads, head_dim, cos.data(), sin.data(), style);
}

}  // namespace flashserve::kernels
