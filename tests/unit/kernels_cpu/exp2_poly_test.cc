// exp2_poly (kernels/attention/exp2_poly.h): the FMA-pipe 2^x of the Hopper prefill kernel's
// softmax, against exp2 in double, over every exponent the softmax can produce (x <= 0).
#include "kernels/attention/exp2_poly.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace flashserve::kernels {
namespace {

// Within 2 ulp of 2^x (ex2.approx's accuracy) wherever the result is a normal float: a
// million points over [-125.5, 0], the half-way points of the rounding to n (f = +-1/2,
// where the polynomial's error peaks) and the first floats above -125.5.
TEST(Exp2PolyTest, WithinTwoUlpOverTheSoftmaxRange) {
  double worst = 0;
  float worst_x = 0;
  auto check = [&](float x) {
    const double want = std::exp2(static_cast<double>(x));
    const double rel = std::abs(static_cast<double>(exp2_poly(x)) - want) / want;
    if (rel > worst) worst = rel, worst_x = x;
  };
  constexpr int kPoints = 1 << 20;
  for (int i = 0; i <= kPoints; ++i) check(-125.5f * static_cast<float>(i) / kPoints);
  for (int n = -125; n <= 0; ++n) {
    check(static_cast<float>(n) - 0.5f);
    check(std::nextafter(static_cast<float>(n) - 0.5f, 0.f));
    check(std::nextafter(static_cast<float>(n) + 0.5f, -1.f));
  }
  float x = -125.5f;
  for (int i = 0; i < 1000; ++i, x = std::nextafter(x, 0.f)) check(x);
  EXPECT_LE(worst, 0x1p-22) << "at x = " << worst_x;
}

// Integers are exact (f = 0, p = 1, only the exponent moves), 2^0 = 1 in particular (a row's
// maximum), and everything from -125.5 down, -inf and NaN included, is exactly 0.
TEST(Exp2PolyTest, ExactAtIntegersAndZeroBelowTheNormalRange) {
  for (int n = -125; n <= 0; ++n) {
    EXPECT_EQ(exp2_poly(static_cast<float>(n)), std::ldexp(1.f, n)) << "n = " << n;
  }
  EXPECT_EQ(exp2_poly(std::nextafter(-125.5f, -126.f)), 0.f);
  EXPECT_EQ(exp2_poly(-126.f), 0.f);
  EXPECT_EQ(exp2_poly(-1000.f), 0.f);
  EXPECT_EQ(exp2_poly(-std::numeric_limits<float>::infinity()), 0.f);
  EXPECT_EQ(exp2_poly(std::numeric_limits<float>::quiet_NaN()), 0.f);
  EXPECT_GT(exp2_poly(-125.5f), 0.f);
}

}  // namespace
}  // namespace flashserve::kernels
