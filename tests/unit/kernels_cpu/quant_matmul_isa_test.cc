// Every SIMD path of the quantized products (kernels/cpu/quant_matmul.h) that this CPU runs
// gives the scalar path's bits, on random blocks of every format, odd shapes, with and
// without accumulation. A path this CPU (or OS) lacks is skipped, saying so: these tests are
// labelled cpu_isa, the one kind of skip besides gpu that scripts/skip-policy.sh accepts.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/quant_matmul.h"
#include "kernels/quant/quant_unit.h"
#include "quant_matmul_test_util.h"
#include "tests/support/quant_blocks.h"

namespace flashserve::kernels {
namespace {

using quant::kQuantFormats;
using namespace quant_matmul_test;

void expect_simd_matches_scalar(CpuIsa isa) {
  std::mt19937 rng(3);
  for (WeightFormat f : kQuantFormats) {
    for (const Shape& s : shapes(f)) {
      const std::vector<uint8_t> w = testing::random_ggml_tensor(f, s.n, s.k, rng);
      const std::vector<float> x = random_activations(s.m, s.k, rng);
      Q8Activations a;
      quantize_activations_q8(x.data(), s.m, s.k, &a);
      std::vector<float> y0(static_cast<size_t>(s.m * s.n));
      std::normal_distribution<float> dist(0.f, 1.f);
      for (float& v : y0) v = dist(rng);
      for (bool accumulate : {false, true}) {
        const std::vector<float> want = run(CpuIsa::kScalar, f, w, s, a, y0, accumulate);
        const std::vector<float> got = run(isa, f, w, s, a, y0, accumulate);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_EQ(got[i], want[i]) << cpu_isa_name(isa) << " " << name(f, s) << " output "
                                     << i << (accumulate ? " (accumulate)" : "");
        }
      }
    }
  }
}

TEST(QuantMatmulTest, Avx2MatchesScalarBitwise) {
  if (!cpu_isa_runs(CpuIsa::kAvx2)) GTEST_SKIP() << "this CPU (or OS) does not run AVX2";
  expect_simd_matches_scalar(CpuIsa::kAvx2);
}

TEST(QuantMatmulTest, Avx512MatchesScalarBitwise) {
  if (!cpu_isa_runs(CpuIsa::kAvx512)) {
    GTEST_SKIP() << "this CPU (or OS) does not run AVX-512 F/BW/VL/DQ + VNNI";
  }
  expect_simd_matches_scalar(CpuIsa::kAvx512);
}

}  // namespace
}  // namespace flashserve::kernels
