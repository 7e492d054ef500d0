// The CPU's quantized products (kernels/cpu/quant_matmul.h) on random blocks of every
// format (tests/support/quant_blocks.h) and odd shapes: the scalar path against the fp32
// reference quant_gemv_cpu (kernels/cpu/quant.h) and each row's result independent of the
// other rows (every path this CPU runs). The SIMD paths against the scalar one bit for bit:
// quant_matmul_isa_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemv.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/quant/quant_unit.h"
#include "tests/support/quant_blocks.h"
#include "quant_matmul_test_util.h"

namespace flashserve::kernels {
namespace {

using quant::kQuantFormats;
using namespace quant_matmul_test;

// Every path's activation quantization gives the scalar one's bits.
TEST(QuantMatmulTest, ActivationPathsMatchScalarBitwise) {
  std::mt19937 rng(5);
  const int m = 5;
  const int64_t k = 576;
  const std::vector<float> x = random_activations(m, k, rng);
  Q8Activations want;
  quantize_activations_q8(x.data(), m, k, &want);
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!cpu_isa_runs(isa)) continue;  // Avx2/Avx512MatchesScalarBitwise say which are absent
    Q8Activations got;
    resize_activations_q8(m, k, &got);
    quantize_activation_rows_q8(isa, x.data(), 0, 2, &got);
    quantize_activation_rows_q8(isa, x.data(), 2, m, &got);
    for (int64_t i = 0; i < m * k; ++i) ASSERT_EQ(got.q[i], want.q[i]) << cpu_isa_name(isa) << i;
    for (int64_t i = 0; i < m * k / 4; ++i) {
      ASSERT_EQ(got.dx8[i], want.dx8[i]) << cpu_isa_name(isa) << " lane " << i;
      ASSERT_EQ(got.lane_sum[i], want.lane_sum[i]) << cpu_isa_name(isa) << " lane " << i;
      ASSERT_EQ(got.lane_dsum[i], want.lane_dsum[i]) << cpu_isa_name(isa) << " lane " << i;
    }
  }
}

TEST(QuantMatmulTest, ActivationsAreQuantizeQ8WithLaneSums) {
  std::mt19937 rng(1);
  const int m = 3;
  const int64_t k = 96;
  const std::vector<float> x = random_activations(m, k, rng);
  Q8Activations a;
  quantize_activations_q8(x.data(), m, k, &a);
  for (int r = 0; r < m; ++r) {
    std::vector<int8_t> q(k);
    std::vector<float> d(k / 32);
    quantize_q8_cpu(x.data() + r * k, k, q.data(), d.data());
    for (int64_t i = 0; i < k; ++i) ASSERT_EQ(a.q[r * k + i], q[i]) << r << ", " << i;
    for (int64_t u = 0; u < k / 32; ++u) {
      for (int l = 0; l < 8; ++l) {
        const int64_t lane = (r * (k / 32) + u) * 8 + l;
        int sum = 0;
        for (int i = 0; i < 4; ++i) sum += q[u * 32 + 4 * l + i];
        EXPECT_EQ(a.dx8[lane], d[u]);
        EXPECT_EQ(a.lane_sum[lane], sum);
        EXPECT_EQ(a.lane_dsum[lane], d[u] * static_cast<float>(sum));
      }
    }
  }
}

// The canonical order sums about num_units / 2 + 4 fp32 terms per lane chain (each product
// rounded once more), so its error against the double-accumulated reference is bounded by
// (num_units / 2 + 8) * 2^-24 * sum |w^ x^| (plus y's rounding when accumulating); twice
// that is the bound, and a wrong quant, scale or lane gives errors of order sum |w^ x^|.
TEST(QuantMatmulTest, ScalarMatchesTheFp32Reference) {
  std::mt19937 rng(2);
  for (WeightFormat f : kQuantFormats) {
    for (const Shape& s : shapes(f)) {
      const std::vector<uint8_t> w = testing::random_ggml_tensor(f, s.n, s.k, rng);
      const std::vector<float> x = random_activations(s.m, s.k, rng);
      Q8Activations a;
      quantize_activations_q8(x.data(), s.m, s.k, &a);
      const std::vector<float> zero(static_cast<size_t>(s.m * s.n), 0.f);
      const std::vector<float> ours = run(CpuIsa::kScalar, f, w, s, a, zero, false);

      GemvCpuParams g;
      g.input = GemvInput::kBf16;  // x as given (no norm)
      g.x = x.data();
      g.output = GemvOutput::kFp32;
      std::vector<float> ref(zero.size());
      g.y = ref.data();
      g.m = s.m, g.n = s.n, g.k = static_cast<int>(s.k);
      ASSERT_TRUE(quant_gemv_cpu(g, f, w.data()).ok());
      // sum |w^ x^| per output, from the dequantized operands.
      std::vector<float> wf(static_cast<size_t>(s.n * s.k));
      ASSERT_TRUE(dequantize_ggml_cpu(f, w.data(), s.n * s.k, wf.data()).ok());
      for (int r = 0; r < s.m; ++r) {
        for (int j = 0; j < s.n; ++j) {
          double mag = 0;
          for (int64_t i = 0; i < s.k; ++i) {
            const int64_t e = r * s.k + i;
            mag += std::fabs(double{wf[j * s.k + i]} * a.dx8[e / 32 * 8] * a.q[e]);
          }
          const double bound = 2 * (s.k / 32 / 2.0 + 8) * std::ldexp(1.0, -24) * mag;
          EXPECT_LE(std::fabs(double{ours[r * s.n + j]} - ref[r * s.n + j]), bound)
              << name(f, s) << " at (" << r << ", " << j << ")";
        }
      }
    }
  }
}

// Row r of a 37-row product equals the same activation row alone (m = 1), bit for bit, on
// every path: the tiles of 1, 2 or 4 rows all follow the canonical order.
TEST(QuantMatmulTest, EachRowIsIndependentOfTheOthers) {
  std::mt19937 rng(4);
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!cpu_isa_runs(isa)) continue;  // quant_matmul_isa_test.cc says which are absent
    for (WeightFormat f : kQuantFormats) {
      const Shape s{37, 11, weight_block_elements(f) == 256 ? 512 : 160};
      const std::vector<uint8_t> w = testing::random_ggml_tensor(f, s.n, s.k, rng);
      const std::vector<float> x = random_activations(s.m, s.k, rng);
      Q8Activations all;
      quantize_activations_q8(x.data(), s.m, s.k, &all);
      const std::vector<float> zero(static_cast<size_t>(s.m * s.n), 0.f);
      const std::vector<float> together = run(isa, f, w, s, all, zero, false);
      for (int r = 0; r < s.m; ++r) {
        Q8Activations one;
        quantize_activations_q8(x.data() + r * s.k, 1, s.k, &one);
        const Shape s1{1, s.n, s.k};
        const std::vector<float> alone =
            run(isa, f, w, s1, one, std::vector<float>(s.n, 0.f), false);
        for (int j = 0; j < s.n; ++j) {
          ASSERT_EQ(together[r * s.n + j], alone[j])
              << cpu_isa_name(isa) << " " << weight_format_name(f) << " row " << r;
        }
      }
    }
  }
}

TEST(QuantMatmulTest, ReportsTheInstructionSets) {
  EXPECT_TRUE(cpu_isa_runs(CpuIsa::kScalar));
  if (cpu_isa_runs(CpuIsa::kAvx512)) EXPECT_TRUE(cpu_isa_runs(CpuIsa::kAvx2));
  std::printf("quantized products here: %s (avx2 %d, avx512 %d)\n", cpu_isa_name(best_cpu_isa()),
              cpu_isa_runs(CpuIsa::kAvx2), cpu_isa_runs(CpuIsa::kAvx512));
}

}  // namespace
}  // namespace flashserve::kernels
