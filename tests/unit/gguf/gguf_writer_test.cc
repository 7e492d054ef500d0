// The GGUF writer's streaming path and quantize_row (model/gguf/gguf_writer.h, quantize.h):
// a streamed file equals the in-memory image, declared tensors are sized from dims and type,
// and a failing or short `fill` leaves no file behind.
#include "model/gguf/gguf_writer.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/bf16.h"
#include "model/gguf/gguf.h"
#include "model/gguf/quantize.h"

namespace flashserve::model {
namespace {

using ::testing::HasSubstr;

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("gguf_writer_" + name)).string();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::vector<float> ramp(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = 0.01f * (i % 17) - 0.05f * (i % 5);
  return v;
}

TEST(GgufWriterTest, StreamedDeclaredTensorsEqualTheInMemoryImage) {
  const std::vector<float> values = ramp(64 * 3);
  GgufWriter in_memory;
  in_memory.add("general.architecture", gguf_string("llama"));
  in_memory.add_tensor_f32("norm", {5}, {1, 2, 3, 4, 5});
  in_memory.add_tensor_q4_1("w", {64, 3}, values);
  GgufWriter streamed;
  streamed.add("general.architecture", gguf_string("llama"));
  streamed.add_tensor_f32("norm", {5}, {1, 2, 3, 4, 5});
  streamed.declare_tensor("w", {64, 3}, GgmlType::kQ4_1);
  const std::string path = temp_path("streamed.gguf");
  absl::Status s = streamed.write_file(path, [&](size_t index, std::string* data) {
    EXPECT_EQ(index, 1u);
    data->resize(*quantized_size(GgmlType::kQ4_1, values.size()));
    return quantize_row(GgmlType::kQ4_1, values,
                        std::span<uint8_t>(reinterpret_cast<uint8_t*>(data->data()), data->size()));
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(read_file(path) == in_memory.bytes());
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->find_tensor("w")->num_bytes, 3u * 2 * 20);
}

TEST(GgufWriterTest, BadFillsAndShapesLeaveNoFile) {
  const std::string path = temp_path("never.gguf");
  std::filesystem::remove(path);
  GgufWriter w;
  w.declare_tensor("blk.0.attn_q.weight", {64, 2}, GgmlType::kQ8_0);
  absl::Status s = w.write_file(path, [](size_t, std::string* data) {
    data->assign(10, 'x');
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'blk.0.attn_q.weight' got 10 bytes of data, its dims and type need 136"));
  s = w.write_file(path, [](size_t, std::string*) { return absl::DataLossError("generator broke"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  s = w.write_file(path);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'blk.0.attn_q.weight' has no data"));
  GgufWriter odd;
  odd.declare_tensor("odd", {48, 2}, GgmlType::kQ4_0);
  s = odd.write_file(path, [](size_t, std::string*) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("'odd' of type q4_0 has rows of 48 elements"));
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".part"));
}

TEST(QuantizeTest, RowEncoderMatchesTheBlockEncodersAndChecksSizes) {
  const std::vector<float> x = ramp(96);
  const std::pair<GgmlType, std::string> cases[] = {
      {GgmlType::kQ8_0, quantize_q8_0(x)}, {GgmlType::kQ4_0, quantize_q4_0(x)}, {GgmlType::kQ4_1, quantize_q4_1(x)}};
  for (const auto& [type, expected] : cases) {
    std::vector<uint8_t> out(expected.size());
    ASSERT_TRUE(quantize_row(type, x, out).ok());
    EXPECT_TRUE(std::string(out.begin(), out.end()) == expected) << ggml_type_name(type);
  }
  std::vector<uint8_t> out(96 * 2);
  ASSERT_TRUE(quantize_row(GgmlType::kBF16, x, out).ok());
  EXPECT_EQ(out[0] | (out[1] << 8), fp32_to_bf16_bits(x[0]));
  EXPECT_EQ(quantize_row(GgmlType::kQ8_0, std::span<const float>(x).first(40), out).code(),
            absl::StatusCode::kInvalidArgument);  // not whole blocks
  EXPECT_EQ(quantize_row(GgmlType::kF16, x, out).code(), absl::StatusCode::kOk);
  EXPECT_EQ(quantize_row(GgmlType::kF32, x, out).code(), absl::StatusCode::kInvalidArgument);  // output too small
  EXPECT_EQ(quantize_row(GgmlType::kIQ2_XXS, x, out).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace flashserve::model
