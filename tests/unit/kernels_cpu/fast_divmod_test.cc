// Division by an invariant divisor as multiply-high and shift (kernels/attention/fast_divmod.h)
// against the hardware's division: every divisor the attention walk uses (row blocks, heads,
// group sizes, grids: 1-4,096), powers of two and their neighbours up to 2^30, and the largest
// divisors, each over small dividends, dividends around multiples of the divisor, and the
// top of the int range, where an off-by-one in the multiplier first shows.
#include "kernels/attention/fast_divmod.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <vector>

namespace flashserve::kernels {
namespace {

void check(int d, int n) {
  const FastDivmod f(d);
  int rem = -1;
  const int q = f.divmod(n, rem);
  ASSERT_EQ(q, n / d) << "n " << n << " d " << d;
  ASSERT_EQ(rem, n % d) << "n " << n << " d " << d;
}

std::vector<int> divisors() {
  std::vector<int> ds;
  for (int d = 1; d <= 4096; ++d) ds.push_back(d);
  for (int k = 12; k <= 30; ++k) {
    for (int e : {-1, 0, 1}) ds.push_back((1 << k) + e);
  }
  ds.push_back(INT_MAX - 1);
  ds.push_back(INT_MAX);
  ds.push_back(1'000'000'007);
  ds.push_back(3 * 7 * 11 * 13 * 17 * 19);
  return ds;
}

TEST(FastDivmodTest, SmallDividends) {
  for (int d : divisors()) {
    for (int n = 0; n < 600; ++n) check(d, n);
  }
}

TEST(FastDivmodTest, AroundMultiplesOfTheDivisor) {
  for (int d : divisors()) {
    for (int64_t q : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{1000}, int64_t{65'537},
                      int64_t{INT_MAX} / d, int64_t{INT_MAX} / d - 1}) {
      for (int e : {-1, 0, 1}) {
        const int64_t n = q * d + e;
        if (n >= 0 && n <= INT_MAX) check(d, static_cast<int>(n));
      }
    }
  }
}

TEST(FastDivmodTest, TopOfTheRange) {
  for (int d : divisors()) {
    for (int n = INT_MAX; n > INT_MAX - 300; --n) check(d, n);
  }
}

TEST(FastDivmodTest, EveryDividendForSmallDivisors) {
  // Every n < 2^20 for the divisors a sequence's row blocks and heads take most often.
  for (int d : {1, 2, 3, 5, 6, 7, 9, 12, 15, 24, 32, 48, 132}) {
    const FastDivmod f(d);
    for (int n = 0; n < (1 << 20); ++n) {
      ASSERT_EQ(f.div(n), n / d) << "n " << n << " d " << d;
    }
  }
}

}  // namespace
}  // namespace flashserve::kernels
