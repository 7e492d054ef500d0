// Our encoders (model/gguf/quantize.h) for every type, through our decoders (which
// quant_golden_test checks bit for bit against gguf-py): the round-trip error within the
// bound ggml-org/llama.cpp:tests/test-quantize-fns.cpp holds ggml's quantizers to, and within
// a per-type bound on Gaussian weights; edge cases (zeros, constants, outliers, tiny and
// large magnitudes) decode finite and close.
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/dequant.h"
#include "model/gguf/ggml_type.h"
#include "model/gguf/quantize.h"

namespace flashserve::model {
namespace {

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  auto size = quantized_size(type, static_cast<int64_t>(x.size()));
  EXPECT_TRUE(size.ok()) << size.status();
  std::vector<uint8_t> bytes(size.value_or(0));
  EXPECT_TRUE(quantize_row(type, x, bytes).ok()) << ggml_type_name(type);
  std::vector<float> out(x.size());
  EXPECT_TRUE(dequantize_row(type, bytes.data(), static_cast<int64_t>(x.size()), out.data()).ok());
  return out;
}

double sum_sq_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return sum;
}

struct TypeBound {
  GgmlType type;
  float ggml_total_error;  // test-quantize-fns' MAX_QUANTIZATION_TOTAL_ERROR(_2BITS / _3BITS)
  float gaussian_rel_rmse; // measured on N(0, 1) (see below) plus ~15 %
};

// Gaussian relative RMSE ||y - x|| / ||x|| measured with this file's data (2026-12-01):
// q8_0 0.0054, q6_K 0.0177, q5_K 0.0359, q5_1 0.0376, q5_0 0.0426, q4_K 0.0719,
// iq4_nl 0.0766, iq4_xs 0.0771, q4_1 0.0782, q4_0 0.0865, q3_K 0.1531, q2_K 0.2765.
// The bounds are those plus 15 %: a worse quantizer fails, a reordering of equal fits does
// not. (The 32-element types use ggml's reference rounding, so theirs are ggml's numbers.)
const TypeBound kBounds[] = {
    {GgmlType::kQ8_0, 0.002f, 0.0062f},  {GgmlType::kQ4_0, 0.002f, 0.099f},
    {GgmlType::kQ4_1, 0.002f, 0.090f},   {GgmlType::kQ5_0, 0.002f, 0.049f},
    {GgmlType::kQ5_1, 0.002f, 0.043f},   {GgmlType::kIQ4_NL, 0.002f, 0.088f},
    {GgmlType::kQ2_K, 0.0075f, 0.32f},   {GgmlType::kQ3_K, 0.0040f, 0.176f},
    {GgmlType::kQ4_K, 0.002f, 0.083f},   {GgmlType::kQ5_K, 0.002f, 0.041f},
    {GgmlType::kQ6_K, 0.002f, 0.0204f},  {GgmlType::kIQ4_XS, 0.002f, 0.089f},
};

TEST(QuantizeTest, RoundTripErrorWithinGgmlsOwnBoundOnItsSyntheticData) {
  // test-quantize-fns: x[i] = 0.1 + 2 cos(i), 4096 values, error sqrt(sum d^2) / n.
  std::vector<float> x(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f + 2.f * std::cos(static_cast<float>(i));
  for (const TypeBound& b : kBounds) {
    const std::vector<float> y = round_trip(b.type, x);
    const double error = std::sqrt(sum_sq_diff(x, y)) / x.size();
    EXPECT_LT(error, b.ggml_total_error) << ggml_type_name(b.type);
  }
}

TEST(QuantizeTest, RoundTripRelativeErrorOnGaussianWeights) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.f, 0.02f);
  std::vector<float> x(64 * 256);
  for (float& v : x) v = normal(rng);
  double norm = 0;
  for (float v : x) norm += static_cast<double>(v) * v;
  for (const TypeBound& b : kBounds) {
    const double rel = std::sqrt(sum_sq_diff(x, round_trip(b.type, x)) / norm);
    EXPECT_LT(rel, b.gaussian_rel_rmse) << ggml_type_name(b.type);
    std::printf("%-7s relative rmse %.4f\n", ggml_type_name(b.type).c_str(), rel);
  }
}

TEST(QuantizeTest, EdgeCasesDecodeFiniteAndClose) {
  std::vector<std::vector<float>> cases;
  cases.emplace_back(256, 0.f);                       // all zero
  cases.emplace_back(256, 0.75f);                     // constant positive
  cases.emplace_back(256, -3.f);                      // constant negative
  std::vector<float> outlier(256, 0.01f);
  outlier[77] = 40.f;                                 // one outlier
  cases.push_back(outlier);
  std::vector<float> tiny(256), large(256), ramp(256);
  for (int i = 0; i < 256; ++i) {
    tiny[i] = 1e-4f * std::sin(static_cast<float>(i));  // K-quant super-block scales: fp16 subnormals
    large[i] = 1000.f * std::cos(static_cast<float>(i));
    ramp[i] = static_cast<float>(i) - 100.f;
  }
  cases.push_back(tiny);
  cases.push_back(large);
  cases.push_back(ramp);
  for (const TypeBound& b : kBounds) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const std::vector<float>& x = cases[c];
      const std::vector<float> y = round_trip(b.type, x);
      double norm = 0;
      for (float v : x) norm += static_cast<double>(v) * v;
      for (float v : y) ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(b.type) << " case " << c;
      if (norm == 0) {
        for (float v : y) EXPECT_EQ(v, 0.f) << ggml_type_name(b.type);
        continue;
      }
      // Within the format's step on every case but the outlier one (whose small values
      // share a block with 40 and round to 0 in the coarser formats: relative error ~0.005).
      const double rel = std::sqrt(sum_sq_diff(x, y) / norm);
      EXPECT_LT(rel, 2.5 * b.gaussian_rel_rmse) << ggml_type_name(b.type) << " case " << c;
    }
  }
}

TEST(QuantizeTest, EveryReadableTypeCanBeWrittenAndSizesAreChecked) {
  for (uint32_t id = 0; id < 64; ++id) {
    const GgmlType t = static_cast<GgmlType>(id);
    EXPECT_EQ(ggml_type_can_quantize(t), ggml_type_can_dequantize(t)) << ggml_type_name(t);
  }
  std::vector<float> x(256, 1.f);
  std::vector<uint8_t> out(144);
  EXPECT_TRUE(quantize_row(GgmlType::kQ4_K, x, out).ok());
  EXPECT_EQ(quantize_row(GgmlType::kQ4_K, std::span<const float>(x).first(128), out).code(),
            absl::StatusCode::kInvalidArgument);  // half a super-block
  std::vector<uint8_t> wrong(143);
  EXPECT_EQ(quantize_row(GgmlType::kQ4_K, x, wrong).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status s = quantize_row(GgmlType::kIQ2_XXS, x, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("q6_K"), std::string::npos) << s;  // lists what we can write
}

}  // namespace
}  // namespace flashserve::model
