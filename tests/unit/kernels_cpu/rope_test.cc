// rope_cpu against a double-precision rotation, and the GGUF layout claim of rope.h:
// adjacent-pair RoPE on llama.cpp-permuted rows == half-split (HF) RoPE on HF rows.
//
// Tolerance (u = 2^-24, the largest relative error of one rounding to nearest). cos and sin
// are the double values rounded to float (<= u relative); a*c - b*s then takes two products
// and a difference, each rounded (<= u). So |out - exact| <= 2 u (|a c| + |b s|) +
// u |result| <= 3 u (|a| + |b|) plus terms of order u^2; we allow 3.2 u (|a| + |b|). The double reference's own error (~1e-16 relative, angle error
// pos * 1e-16 for pos < 2^15) is far below that.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/rope.h"

namespace flashserve::kernels {
namespace {

constexpr double kUnitRoundoff = 5.9604644775390625e-8;  // 2^-24

std::vector<float> random_vector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Rotates pair (a, b) of every head in double; pairs are (2i, 2i+1) when adjacent.
void expect_matches_double_rotation(const std::vector<float>& before,
                                    const std::vector<float>& after,
                                    const std::vector<int32_t>& positions, int num_heads,
                                    int head_dim, double theta, bool adjacent) {
  const int half = head_dim / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int h = 0; h < num_heads; ++h) {
      const size_t base = (t * num_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const size_t ia = base + (adjacent ? 2 * i : i);
        const size_t ib = base + (adjacent ? 2 * i + 1 : i + half);
        // theta^(-2i/d) written as 1 / theta^(2i/d): a different evaluation than the kernel.
        const double angle = positions[t] / std::pow(theta, (2.0 * i) / head_dim);
        const double a = before[ia], b = before[ib];
        const double ra = a * std::cos(angle) - b * std::sin(angle);
        const double rb = a * std::sin(angle) + b * std::cos(angle);
        const double tol = 3.2 * kUnitRoundoff * (std::abs(a) + std::abs(b));
        ASSERT_NEAR(after[ia], ra, tol) << "token " << t << " head " << h << " pair " << i;
        ASSERT_NEAR(after[ib], rb, tol) << "token " << t << " head " << h << " pair " << i;
      }
    }
  }
}

struct RopeCase {
  int num_heads, num_kv_heads, head_dim;
  float theta;
};

TEST(RopeCpu, MatchesDoubleRotationForQueriesAndKeys) {
  const std::vector<int32_t> positions = {0, 1, 2, 17, 96, 1000, 4095, 32767, 5};
  std::mt19937 rng(7);
  for (const RopeCase c : {RopeCase{9, 3, 64, 10000.f}, RopeCase{8, 1, 128, 500000.f},
                           RopeCase{4, 4, 2, 10000.f}}) {
    for (RopeStyle style : {RopeStyle::kAdjacentPairs, RopeStyle::kHalfSplit}) {
      const int num_tokens = static_cast<int>(positions.size());
      const auto q0 = random_vector(size_t{1} * num_tokens * c.num_heads * c.head_dim, rng);
      const auto k0 = random_vector(size_t{1} * num_tokens * c.num_kv_heads * c.head_dim, rng);
      auto q = q0, k = k0;
      rope_cpu(q.data(), k.data(), positions.data(), num_tokens, c.num_heads, c.num_kv_heads,
               c.head_dim, c.theta, style);
      const bool adjacent = style == RopeStyle::kAdjacentPairs;
      SCOPED_TRACE(::testing::Message() << "heads " << c.num_heads << "/" << c.num_kv_heads
                                        << " d " << c.head_dim << " adjacent " << adjacent);
      expect_matches_double_rotation(q0, q, positions, c.num_heads, c.head_dim, c.theta,
                                     adjacent);
      expect_matches_double_rotation(k0, k, positions, c.num_kv_heads, c.head_dim, c.theta,
                                     adjacent);
    }
  }
}

TEST(RopeCpu, PositionZeroIsIdentity) {
  std::mt19937 rng(3);
  const auto q0 = random_vector(9 * 64, rng);
  const auto k0 = random_vector(3 * 64, rng);
  auto q = q0, k = k0;
  const int32_t position = 0;
  rope_cpu(q.data(), k.data(), &position, 1, 9, 3, 64, 10000.f);
  EXPECT_EQ(q, q0);
  EXPECT_EQ(k, k0);
}

// llama.cpp's converter reorders each head's rows so that HF row k * half + j becomes
// GGUF row 2 j + k (reshape(n_head, 2, half).swapaxes). Rotating adjacent pairs of the
// permuted vector must be exactly the HF half-split rotation of the original.
TEST(RopeCpu, AdjacentPairsOnGgufRowsEqualsHalfSplitOnHfRows) {
  const int num_tokens = 5, num_heads = 3, head_dim = 64, half = head_dim / 2;
  const std::vector<int32_t> positions = {0, 3, 64, 511, 2047};
  std::mt19937 rng(11);
  const auto hf = random_vector(size_t{num_tokens} * num_heads * head_dim, rng);
  auto to_gguf = [&](const std::vector<float>& x) {
    std::vector<float> y(x.size());
    for (size_t row = 0; row < x.size() / head_dim; ++row) {
      for (int j = 0; j < half; ++j) {
        for (int k = 0; k < 2; ++k) {
          y[row * head_dim + 2 * j + k] = x[row * head_dim + k * half + j];
        }
      }
    }
    return y;
  };
  std::vector<float> gguf = to_gguf(hf), hf_rot = hf;
  std::vector<float> cos(num_tokens * half), sin(num_tokens * half);
  rope_cos_sin_cpu(positions.data(), num_tokens, head_dim, 10000.f, cos.data(), sin.data());
  rope_apply_cpu(gguf.data(), num_tokens, num_heads, head_dim, cos.data(), sin.data(),
                 RopeStyle::kAdjacentPairs);
  rope_apply_cpu(hf_rot.data(), num_tokens, num_heads, head_dim, cos.data(), sin.data(),
                 RopeStyle::kHalfSplit);
  EXPECT_EQ(gguf, to_gguf(hf_rot));
  EXPECT_NE(gguf, to_gguf(hf));  // the rotation did something
}

}  // namespace
}  // namespace flashserve::kernels
