// rmsnorm_cpu and swiglu_cpu against direct double-precision computations.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/swiglu.h"

namespace flashserve::kernels {
namespace {

constexpr double kUnitRoundoff = 5.9604644775390625e-8;  // 2^-24

std::vector<float> random_vector(size_t n, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Tolerance (u = 2^-24, the largest relative error of one rounding to nearest): the sum of
// squares is in double (relative error ~dim * 1e-16, negligible); the float scale carries
// <= u from its rounding, and (x * scale) * w two more roundings of <= u each:
// |y - exact| <= ((1 + u)^3 - 1) |exact| ~ 3 u |exact|. We allow 3.2 u |exact|.
TEST(RmsNormCpu, MatchesDoubleReference) {
  std::mt19937 rng(5);
  for (int dim : {1, 7, 64, 576, 2048}) {
    for (float magnitude : {1e-3f, 1.f, 1e3f}) {
      const int num_rows = 13;
      const float eps = 1e-5f;
      const auto x = random_vector(size_t{1} * num_rows * dim, -magnitude, magnitude, rng);
      const auto w = random_vector(dim, -2.f, 2.f, rng);
      std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
      rmsnorm_cpu(x.data(), w.data(), num_rows, dim, eps, y.data());
      for (int r = 0; r < num_rows; ++r) {
        double sum_sq = 0;
        for (int c = 0; c < dim; ++c) sum_sq += static_cast<double>(x[r * dim + c]) * x[r * dim + c];
        const double inv_rms = 1.0 / std::sqrt(sum_sq / dim + static_cast<double>(eps));
        for (int c = 0; c < dim; ++c) {
          const double expected = x[r * dim + c] * inv_rms * w[c];
          ASSERT_NEAR(y[r * dim + c], expected, 3.2 * kUnitRoundoff * std::abs(expected))
              << "dim " << dim << " magnitude " << magnitude << " row " << r << " col " << c;
        }
      }
    }
  }
}

TEST(RmsNormCpu, InPlaceEqualsOutOfPlaceAndZeroRowStaysFinite) {
  std::mt19937 rng(6);
  const int num_rows = 4, dim = 576;
  auto x = random_vector(size_t{num_rows} * dim, -1.f, 1.f, rng);
  std::fill(x.begin(), x.begin() + dim, 0.f);  // row 0 all zero: eps keeps it finite
  const auto w = random_vector(dim, -1.f, 1.f, rng);
  std::vector<float> y(x.size());
  rmsnorm_cpu(x.data(), w.data(), num_rows, dim, 1e-6f, y.data());
  rmsnorm_cpu(x.data(), w.data(), num_rows, dim, 1e-6f, x.data());
  EXPECT_EQ(x, y);
  for (int c = 0; c < dim; ++c) EXPECT_EQ(y[c], 0.f);
}

// Tolerance: glibc's expf is within 1 ulp (<= 2 u relative), then 1 + e, the division and
// the product are each rounded (<= u each): <= 5 u relative (+ O(u^2)); we allow 6 u |exact|
// (the exp error is even damped by 1 + e), plus 1e-37 absolute for
// results below the smallest normal float (1.2e-38), where relative precision ends (g < -87).
TEST(SwiGluCpu, MatchesDoubleReference) {
  std::mt19937 rng(8);
  const int num_rows = 5, ffn_size = 1536;
  auto gate = random_vector(size_t{num_rows} * ffn_size, -30.f, 30.f, rng);
  const auto up = random_vector(gate.size(), -3.f, 3.f, rng);
  gate[0] = -100.f;  // exp(100) overflows float: silu must go to -0, not NaN
  gate[1] = 100.f;
  gate[2] = 0.f;
  std::vector<float> out(gate.size(), std::numeric_limits<float>::quiet_NaN());
  swiglu_cpu(gate.data(), up.data(), num_rows, ffn_size, out.data());
  for (size_t i = 0; i < out.size(); ++i) {
    const double g = gate[i];
    const double expected = g / (1.0 + std::exp(-g)) * up[i];
    ASSERT_NEAR(out[i], expected, 6 * kUnitRoundoff * std::abs(expected) + 1e-37)
        << "gate " << gate[i] << " up " << up[i];
  }
}

TEST(SwiGluCpu, InPlaceOverGate) {
  std::mt19937 rng(9);
  auto gate = random_vector(1000, -8.f, 8.f, rng);
  const auto up = random_vector(1000, -1.f, 1.f, rng);
  std::vector<float> out(gate.size());
  swiglu_cpu(gate.data(), up.data(), 10, 100, out.data());
  swiglu_cpu(gate.data(), up.data(), 10, 100, gate.data());
  EXPECT_EQ(gate, out);
}

// Against gelu_tanh in double, as g / (1 + exp(-2z)): the same function as 0.5 g (1 + tanh(z)),
// whose 1 + tanh(z) loses every digit in double too for z < -15. Tolerance: as SwiGLU's 6 u for the exp, the
// division and the products, plus the rounding of z (a cube, two products and a sum: <= 4 u
// relative), which exp(-2z) turns into 8 |z| u relative; the gelu of a large negative g is
// that ill-conditioned whatever the formula.
TEST(GeGluTanhCpu, MatchesDoubleReference) {
  std::mt19937 rng(10);
  const int num_rows = 5, ffn_size = 1536;
  auto gate = random_vector(size_t{num_rows} * ffn_size, -12.f, 12.f, rng);
  const auto up = random_vector(gate.size(), -3.f, 3.f, rng);
  gate[0] = -100.f;  // exp(-2z) overflows float: the gelu must go to -0, not NaN
  gate[1] = 100.f;
  gate[2] = 0.f;
  std::vector<float> out(gate.size(), std::numeric_limits<float>::quiet_NaN());
  geglu_tanh_cpu(gate.data(), up.data(), num_rows, ffn_size, out.data());
  for (size_t i = 0; i < out.size(); ++i) {
    const double g = gate[i];
    const double z = std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g);
    const double expected = g / (1.0 + std::exp(-2.0 * z)) * up[i];
    const double tol = (6 + 8 * std::abs(z)) * kUnitRoundoff * std::abs(expected) + 1e-37;
    ASSERT_NEAR(out[i], expected, tol) << "gate " << gate[i] << " up " << up[i];
  }
  EXPECT_EQ(out[0], 0.f);
  EXPECT_NEAR(out[1], 100.0 * up[1], 6 * kUnitRoundoff * 100.0 * std::abs(up[1]));
}

TEST(GeGluTanhCpu, InPlaceOverGate) {
  std::mt19937 rng(11);
  auto gate = random_vector(1000, -8.f, 8.f, rng);
  const auto up = random_vector(1000, -1.f, 1.f, rng);
  std::vector<float> out(gate.size());
  geglu_tanh_cpu(gate.data(), up.data(), 10, 100, out.data());
  geglu_tanh_cpu(gate.data(), up.data(), 10, 100, gate.data());
  EXPECT_EQ(gate, out);
}

}  // namespace
}  // namespace flashserve::kernels
