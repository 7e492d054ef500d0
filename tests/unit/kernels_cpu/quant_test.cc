// The quantized-weight pieces that need no GPU: quant_repack's device layout, decoded by the
// very functions the GPU kernel runs (kernels/quant/quant_unit.h, compiled here for the
// host), against ggml's dequantization (kernels/cpu/quant.h) on random blocks; and the
// quantized GEMV's integer arithmetic, emulated unit by unit, against quant_gemv_cpu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/bf16.h"
#include "kernels/cpu/gemv.h"
#include "kernels/cpu/quant.h"
#include "kernels/quant/quant_layout.h"
#include "kernels/quant/quant_unit.h"
#include "tests/support/quant_blocks.h"

namespace flashserve::kernels {
namespace {

using quant::dispatch_quant_format;
using quant::kQuantFormats;

uint32_t word_at(const std::vector<uint8_t>& t, int64_t offset) {
  uint32_t w;
  std::memcpy(&w, t.data() + offset, 4);
  return w;
}

// The words a lane loads for unit u of `row` (as the kernel's 16/8/4/2-byte loads).
quant::UnitRaw load_raw(WeightFormat f, const QuantLayout& l, const std::vector<uint8_t>& t,
                        int64_t row, int64_t u) {
  const quant::UnitOffsets o = quant::unit_offsets(f, l, row, u);
  quant::UnitRaw r{};
  for (int i = 0; i < 4; ++i) r.qs[i] = word_at(t, o.qs + 4 * i);
  if (f == WeightFormat::kQ8_0) {
    for (int i = 0; i < 4; ++i) r.qs[4 + i] = word_at(t, o.qs_hi + 4 * i);
  }
  if (f == WeightFormat::kQ5_K) r.qh[0] = word_at(t, o.qh);
  if (f == WeightFormat::kQ6_K) r.qh[0] = word_at(t, o.qh), r.qh[1] = word_at(t, o.qh + 4);
  if (f == WeightFormat::kQ4_K || f == WeightFormat::kQ5_K) {
    for (int i = 0; i < 4; ++i) r.sc[i] = word_at(t, o.scale + 4 * i);
  } else if (f == WeightFormat::kQ4_1) {
    r.sc[0] = word_at(t, o.scale);
  } else {
    r.sc[0] = uint32_t{t[o.scale]} | uint32_t{t[o.scale + 1]} << 8;
  }
  if (f == WeightFormat::kQ6_K) r.sc[1] = uint32_t{t[o.d]} | uint32_t{t[o.d + 1]} << 8;
  return r;
}

std::vector<uint8_t> repack(WeightFormat f, const std::vector<uint8_t>& ggml, int64_t rows,
                            int64_t k) {
  std::vector<uint8_t> out(static_cast<size_t>(quant_layout(f, rows, k).total_bytes));
  EXPECT_TRUE(quant_repack(f, ggml.data(), static_cast<int64_t>(ggml.size()), rows, k,
                           out.data(), static_cast<int64_t>(out.size()))
                  .ok());
  return out;
}

// A one-hot activation (x^ = 1 at element i of the unit) makes the unit's contribution the
// weight itself: a * q + c (+ e), which must be ggml's value.
TEST(QuantUnit, RepackedUnitsDecodeToGgmlValues) {
  std::mt19937 rng(std::random_device{}());
  const int64_t rows = 3, k = 768;
  for (WeightFormat f : kQuantFormats) {
    SCOPED_TRACE(weight_format_name(f));
    const std::vector<uint8_t> ggml = testing::random_ggml_tensor(f, rows, k, rng);
    std::vector<float> ref(static_cast<size_t>(rows * k));
    ASSERT_TRUE(dequantize_ggml_cpu(f, ggml.data(), rows * k, ref.data()).ok());
    const std::vector<uint8_t> t = repack(f, ggml, rows, k);
    const QuantLayout l = quant_layout(f, rows, k);
    float max_abs = 0;
    for (float v : ref) max_abs = std::max(max_abs, std::fabs(v));
    int bad = 0;
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t u = 0; u < k / kQuantUnit; ++u) {
        const quant::UnitRaw raw = load_raw(f, l, t, row, u);
        for (int i = 0; i < kQuantUnit; ++i) {
          uint32_t xlo[4] = {}, xhi[4] = {};
          // (Not `(i < 16 ? xlo : xhi)[...] = ...`: gcc 12 with -fsanitize=shift (or any
          // arithmetic check of UBSan) stored that into the wrong word, no report given.)
          uint32_t* x = i < 16 ? xlo : xhi;
          x[(i % 16) / 4] = 1u << (8 * (i % 4));
          const float got = dispatch_quant_format(f, [&](auto tag) {
            constexpr WeightFormat kF = decltype(tag)::value;
            const quant::Unit w = quant::decode_unit<kF>(raw, static_cast<int>(u));
            return quant::unit_dot<kF>(w, xlo, xhi, 1.f, 1.f, i < 16 ? 1.f : 0.f, 0.f);
          });
          const float want = ref[row * k + u * kQuantUnit + i];
          if (!(std::fabs(got - want) <= 0x1p-20f * max_abs) && ++bad <= 5) {
            ADD_FAILURE() << "row " << row << " element " << u * kQuantUnit + i << ": " << got
                          << ", ggml " << want;
          }
          // The dequantization to bf16 computes ggml's value bit for bit.
          const float exact = dispatch_quant_format(f, [&](auto tag) {
            constexpr WeightFormat kF = decltype(tag)::value;
            return quant::unit_element<kF>(quant::decode_unit<kF>(raw, static_cast<int>(u)), i);
          });
          if (exact != want && ++bad <= 5) {
            ADD_FAILURE() << "row " << row << " element " << u * kQuantUnit + i
                          << ": unit_element " << exact << ", ggml " << want;
          }
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

// The kernel's arithmetic (int8 activations, dp4a sums, per-unit scales) against
// quant_gemv_cpu on random data: the same function up to fp32 rounding, 2^-16 * sum |w^ x^|.
TEST(QuantUnit, EmulatedGemvMatchesTheReference) {
  std::mt19937 rng(std::random_device{}());
  const int m = 3, n = 7, k = 1024;
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m) * k);
  for (float& v : x) v = round_to_bf16(dist(rng));
  for (WeightFormat f : kQuantFormats) {
    SCOPED_TRACE(weight_format_name(f));
    const std::vector<uint8_t> ggml = testing::random_ggml_tensor(f, n, k, rng);
    GemvCpuParams p;
    p.x = x.data();
    p.output = GemvOutput::kFp32;
    p.m = m;
    p.n = n;
    p.k = k;
    std::vector<float> ref(static_cast<size_t>(m) * n);
    p.y = ref.data();
    ASSERT_TRUE(quant_gemv_cpu(p, f, ggml.data()).ok());
    std::vector<float> w(static_cast<size_t>(n) * k);
    ASSERT_TRUE(dequantize_ggml_cpu(f, ggml.data(), n * k, w.data()).ok());
    const std::vector<uint8_t> t = repack(f, ggml, n, k);
    const QuantLayout l = quant_layout(f, n, k);
    std::vector<int8_t> q(k);
    std::vector<float> d(k / kQuantUnit);
    for (int r = 0; r < m; ++r) {
      quantize_q8_cpu(x.data() + r * k, k, q.data(), d.data());
      for (int j = 0; j < n; ++j) {
        float acc = 0;
        double s = 0;
        for (int64_t u = 0; u < k / kQuantUnit; ++u) {
          uint32_t xlo[4], xhi[4];
          std::memcpy(xlo, q.data() + u * kQuantUnit, 16);
          std::memcpy(xhi, q.data() + u * kQuantUnit + 16, 16);
          int sum = 0, sum_lo = 0;
          for (int i = 0; i < kQuantUnit; ++i) {
            sum += q[u * kQuantUnit + i];
            if (i < 16) sum_lo += q[u * kQuantUnit + i];
            s += std::fabs(double{w[j * k + u * kQuantUnit + i]} * d[u] * q[u * kQuantUnit + i]);
          }
          const quant::UnitRaw raw = load_raw(f, l, t, j, u);
          acc = dispatch_quant_format(f, [&](auto tag) {
            constexpr WeightFormat kF = decltype(tag)::value;
            return quant::unit_dot<kF>(quant::decode_unit<kF>(raw, static_cast<int>(u)), xlo,
                                       xhi, d[u], d[u] * sum, d[u] * sum_lo, acc);
          });
        }
        EXPECT_NEAR(acc, ref[r * n + j], 0x1p-16 * s + 1e-7) << "row " << r << " output " << j;
      }
    }
  }
}

// The kernel's activation quantization (magic-number rounding) against quantize_q8_cpu
// (nearbyint), bit for bit: random units, ties (v * id exactly k + 0.5), an all-zero unit.
TEST(QuantUnit, ActivationQuantizationMatchesTheReference) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> dist(0.f, 3.f);
  std::vector<float> x(64 * kQuantUnit);
  for (float& v : x) v = round_to_bf16(dist(rng));
  for (int i = 0; i < kQuantUnit; ++i) x[i] = 0.f;  // unit 0: all zero
  x[kQuantUnit] = 127.f;                           // unit 1: dx = 1, ties at k + 0.5
  for (int i = 1; i < kQuantUnit; ++i) x[kQuantUnit + i] = (i % 2 ? 1.f : -1.f) * (i + 0.5f);
  std::vector<int8_t> q(x.size());
  std::vector<float> d(x.size() / kQuantUnit);
  quantize_q8_cpu(x.data(), static_cast<int64_t>(x.size()), q.data(), d.data());
  EXPECT_EQ(d[1], 1.f);
  EXPECT_EQ(q[kQuantUnit + 2], -2);  // -2.5 rounds to even
  for (size_t u = 0; u < d.size(); ++u) {
    uint32_t words[8];
    int sum = 0, sum_lo = 0;
    float dx = 0;
    quant::quantize_unit(x.data() + u * kQuantUnit, words, &sum, &sum_lo, &dx);
    EXPECT_EQ(dx, d[u]) << "unit " << u;
    int want_sum = 0, want_lo = 0;
    for (int i = 0; i < kQuantUnit; ++i) {
      const int8_t got = static_cast<int8_t>(words[i / 4] >> (8 * (i % 4)));
      EXPECT_EQ(got, q[u * kQuantUnit + i]) << "unit " << u << " element " << i;
      want_sum += q[u * kQuantUnit + i];
      if (i < 16) want_lo += q[u * kQuantUnit + i];
    }
    EXPECT_EQ(sum, want_sum);
    EXPECT_EQ(sum_lo, want_lo);
  }
}

// The repacked layout takes the file's bytes plus at most 4 x 255 bytes of alignment.
TEST(QuantUnit, LayoutTakesTheFilesBytes) {
  for (WeightFormat f : kQuantFormats) {
    for (int64_t rows : {1, 37, 28672}) {
      for (int64_t k : {256, 4096, 14336}) {
        const int64_t file = rows * ggml_row_bytes(f, k);
        const int64_t packed = quant_layout(f, rows, k).total_bytes;
        EXPECT_GE(packed, file) << weight_format_name(f) << " " << rows << " x " << k;
        EXPECT_LT(packed, file + 1024) << weight_format_name(f) << " " << rows << " x " << k;
      }
    }
  }
}

TEST(QuantUnit, RepackRejectsBadShapesNamingThem) {
  std::vector<uint8_t> src(144), dst(4096);
  absl::Status s = quant_repack(WeightFormat::kQ4_K, src.data(), 144, 1, 128, dst.data(), 4096);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("128"), std::string::npos) << s;
  s = quant_repack(WeightFormat::kQ4_K, src.data(), 144, 1, 256, dst.data(), 4096);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);  // dst size
  EXPECT_NE(s.message().find("4096"), std::string::npos) << s;
  EXPECT_EQ(quant_repack(WeightFormat::kBf16, src.data(), 2, 1, 1, dst.data(), 2).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace flashserve::kernels
