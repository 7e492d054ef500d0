// Dequantizers (model/gguf/dequant.h) against blocks built and decoded by hand from ggml's
// definitions, and the fp16 decoder against the compiler's _Float16 on every bit pattern.
#include "model/gguf/dequant.h"

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf.h"
#include "tests/support/gguf_writer.h"

namespace flashserve::model {
namespace {

void put_u16(std::vector<uint8_t>* out, uint16_t v) {
  out->push_back(v & 0xFF);
  out->push_back(v >> 8);
}

constexpr uint16_t kHalfOne = 0x3C00;        // 1.0
constexpr uint16_t kHalfHalf = 0x3800;       // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;    // 0.25
constexpr uint16_t kHalfEighth = 0x3000;     // 0.125
constexpr uint16_t kHalfMinusOne = 0xBC00;   // -1.0
constexpr uint16_t kHalfThree = 0x4200;      // 3.0

TEST(Fp16Test, EveryBitPatternMatchesTheCompilersHalfType) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float want = static_cast<float>(std::bit_cast<_Float16>(static_cast<uint16_t>(bits)));
    const float got = fp16_to_fp32(static_cast<uint16_t>(bits));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << std::hex << bits;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(want), std::bit_cast<uint32_t>(got)) << std::hex << bits;
    }
  }
}

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(fp16_to_fp32(kHalfOne), 1.f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.f);
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x8001), -std::ldexp(1.f, -24));
  EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.f, -24));
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.f, -14));
  EXPECT_EQ(fp16_to_fp32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(fp16_to_fp32(0x8000)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
}

// The test writer's encoder must invert the decoder (it builds quantized test tensors).
TEST(Fp16Test, WriterEncoderInvertsDecoderAndRoundsToNearestEven) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(testing::fp32_to_fp16(f), bits) << std::hex << bits;
  }
  EXPECT_EQ(testing::fp32_to_fp16(1.f + std::ldexp(1.f, -11)), kHalfOne);  // tie -> even
  EXPECT_EQ(testing::fp32_to_fp16(1.f + 3 * std::ldexp(1.f, -11)), kHalfOne + 2);  // tie -> even
  EXPECT_EQ(testing::fp32_to_fp16(65520.f), 0x7C00);
  EXPECT_EQ(testing::fp32_to_fp16(std::ldexp(1.f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(testing::fp32_to_fp16(std::ldexp(3.f, -25)), 0x0002);  // 1.5 ulp -> 2
}

TEST(Bf16Test, UpperHalfOfFloat) {
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.f);
  EXPECT_EQ(bf16_to_fp32(0xC049), -3.140625f);
  EXPECT_EQ(bf16_to_fp32(0x0001), std::bit_cast<float>(0x00010000u));
  std::vector<uint8_t> raw;
  put_u16(&raw, 0x4040);  // 3.0
  put_u16(&raw, 0xBF00);  // -0.5
  float out[2];
  dequantize_bf16(raw.data(), 2, out);
  EXPECT_EQ(out[0], 3.f);
  EXPECT_EQ(out[1], -0.5f);
}

TEST(DequantTest, F16Row) {
  std::vector<uint8_t> raw;
  for (uint16_t h : {kHalfOne, kHalfMinusOne, kHalfEighth, uint16_t{0x0001}}) put_u16(&raw, h);
  float out[4];
  dequantize_f16(raw.data(), 4, out);
  EXPECT_EQ(out[0], 1.f);
  EXPECT_EQ(out[1], -1.f);
  EXPECT_EQ(out[2], 0.125f);
  EXPECT_EQ(out[3], std::ldexp(1.f, -24));
}

// Q4_0: x = (nibble - 8) * d; low nibbles are elements 0..15, high nibbles 16..31.
TEST(DequantTest, Q4_0NibbleOrderAndOffset) {
  std::vector<uint8_t> raw;
  put_u16(&raw, kHalfHalf);
  for (int j = 0; j < 16; ++j) raw.push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
  std::vector<float> out(32);
  dequantize_q4_0(raw.data(), 32, out.data());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(out[j + 16], (15 - j - 8) * 0.5f) << j;
  }
  EXPECT_EQ(out[0], -4.f);
  EXPECT_EQ(out[16], 3.5f);
}

// Q4_1: x = nibble * d + m.
TEST(DequantTest, Q4_1NibbleOrderScaleAndMin) {
  std::vector<uint8_t> raw;
  put_u16(&raw, kHalfQuarter);
  put_u16(&raw, kHalfMinusOne);
  for (int j = 0; j < 16; ++j) raw.push_back(static_cast<uint8_t>(j | ((j ^ 5) << 4)));
  std::vector<float> out(32);
  dequantize_q4_1(raw.data(), 32, out.data());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], j * 0.25f - 1.f) << j;
    EXPECT_EQ(out[j + 16], (j ^ 5) * 0.25f - 1.f) << j;
  }
  EXPECT_EQ(out[1], -0.75f);
  EXPECT_EQ(out[16], 0.25f);  // (0 ^ 5) * 0.25 - 1
}

// Q8_0: x = int8 * d.
TEST(DequantTest, Q8_0SignedBytes) {
  std::vector<uint8_t> raw;
  put_u16(&raw, kHalfEighth);
  for (int j = 0; j < 32; ++j) raw.push_back(static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128)));
  std::vector<float> out(32);
  dequantize_q8_0(raw.data(), 32, out.data());
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], (j * 8 - 128) * 0.125f) << j;
  EXPECT_EQ(out[0], -16.f);
  EXPECT_EQ(out[31], 15.f);
}

// Consecutive blocks use their own scales; a row decodes the same alone or in a tensor.
TEST(DequantTest, MultipleBlocksUseTheirOwnScale) {
  std::vector<uint8_t> raw;
  for (uint16_t d : {kHalfOne, kHalfThree}) {
    put_u16(&raw, d);
    put_u16(&raw, 0);  // m = 0
    for (int j = 0; j < 16; ++j) raw.push_back(0x21);  // low 1, high 2
  }
  std::vector<float> out(64);
  ASSERT_TRUE(dequantize_row(GgmlType::kQ4_1, raw.data(), 64, out.data()).ok());
  EXPECT_EQ(out[0], 1.f);
  EXPECT_EQ(out[16], 2.f);
  EXPECT_EQ(out[32], 3.f);
  EXPECT_EQ(out[63], 6.f);
  std::vector<float> second(32);
  ASSERT_TRUE(dequantize_row(GgmlType::kQ4_1, raw.data() + 20, 32, second.data()).ok());
  EXPECT_EQ(second, std::vector<float>(out.begin() + 32, out.end()));
}

TEST(DequantTest, RowDispatchErrors) {
  std::vector<uint8_t> raw(256, 0);
  float out[64];
  absl::Status s = dequantize_row(GgmlType::kIQ2_XXS, raw.data(), 256, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("iq2_xxs"), std::string::npos) << s;
  s = dequantize_row(GgmlType::kQ4_K, raw.data(), 32, out);  // K-quant blocks hold 256
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("256"), std::string::npos) << s;
  s = dequantize_row(static_cast<GgmlType>(4), raw.data(), 32, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("unknown(4)"), std::string::npos) << s;
  s = dequantize_row(GgmlType::kQ4_0, raw.data(), 33, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("33"), std::string::npos) << s;
  EXPECT_EQ(dequantize_row(GgmlType::kF32, raw.data(), -1, out).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DequantTest, TypeTableMatchesGgmlBlockGeometry) {
  EXPECT_EQ(ggml_type_traits(GgmlType::kQ4_0).block_bytes, 18);
  EXPECT_EQ(ggml_type_traits(GgmlType::kQ4_1).block_bytes, 20);
  EXPECT_EQ(ggml_type_traits(GgmlType::kQ8_0).block_bytes, 34);
  EXPECT_EQ(ggml_type_traits(GgmlType::kQ6_K).block_size, 256);
  EXPECT_EQ(ggml_type_traits(GgmlType::kBF16).block_bytes, 2);
  EXPECT_EQ(ggml_type_traits(static_cast<GgmlType>(31)).block_size, 0);  // removed Q4_0_4_4
  EXPECT_EQ(ggml_type_name(GgmlType::kQ4_1), "q4_1");
}

// The writer's reference quantizers produce blocks the dequantizers decode to within the
// quantization step (a sanity check of the test support, which other tests build on).
TEST(DequantTest, WriterQuantizersRoundTripWithinOneStep) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = std::sin(0.37f * i) * (i < 32 ? 1.f : 5.f);
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0}) {
    testing::GgufWriter w;
    if (type == GgmlType::kQ4_0) w.add_tensor_q4_0("t", {64}, x);
    if (type == GgmlType::kQ4_1) w.add_tensor_q4_1("t", {64}, x);
    if (type == GgmlType::kQ8_0) w.add_tensor_q8_0("t", {64}, x);
    auto file = GgufFile::from_bytes(w.bytes());
    ASSERT_TRUE(file.ok()) << file.status();
    auto y = (*file)->dequantize((*file)->tensors()[0]);
    ASSERT_TRUE(y.ok());
    for (int b = 0; b < 2; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
      const float step = type == GgmlType::kQ8_0 ? amax / 127 : (type == GgmlType::kQ4_0 ? amax / 8 : 2 * amax / 15);
      for (int j = 0; j < 32; ++j) {
        EXPECT_LE(std::fabs((*y)[32 * b + j] - x[32 * b + j]), step) << ggml_type_name(type) << " " << 32 * b + j;
      }
    }
  }
}

}  // namespace
}  // namespace flashserve::model
