// GgufFile on well-formed files built with tests/support/gguf_writer.h: every value type
// (incl. nested arrays) round-trips, v2 and v3, alignment, tensor table, typed getters.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf.h"
#include "tests/support/gguf_writer.h"

namespace flashserve::model {
namespace {

using testing::GgufWriter;
using namespace flashserve::testing;  // value constructors gguf_u8(...), ...

// Compares two values field by field (floats bit for bit, so NaN and -0 count).
void expect_same_value(const GgufValue& want, const GgufValue& got, const std::string& where) {
  ASSERT_EQ(want.type, got.type) << where;
  switch (want.type) {
    case GgufValueType::kString: EXPECT_EQ(want.string_value, got.string_value) << where; break;
    case GgufValueType::kBool: EXPECT_EQ(want.bool_value, got.bool_value) << where; break;
    case GgufValueType::kFloat32:
      EXPECT_EQ(std::bit_cast<uint32_t>(static_cast<float>(want.float_value)),
                std::bit_cast<uint32_t>(static_cast<float>(got.float_value))) << where;
      break;
    case GgufValueType::kFloat64:
      EXPECT_EQ(std::bit_cast<uint64_t>(want.float_value), std::bit_cast<uint64_t>(got.float_value)) << where;
      break;
    case GgufValueType::kArray:
      ASSERT_EQ(want.element_type, got.element_type) << where;
      ASSERT_EQ(want.elements.size(), got.elements.size()) << where;
      for (size_t i = 0; i < want.elements.size(); ++i) {
        expect_same_value(want.elements[i], got.elements[i], where + "[" + std::to_string(i) + "]");
      }
      break;
    default:
      if (want.is_signed()) {
        EXPECT_EQ(want.int_value, got.int_value) << where;
      } else {
        EXPECT_EQ(want.uint_value, got.uint_value) << where;
      }
  }
}

// One value of every type, extremes included.
std::vector<std::pair<std::string, GgufValue>> every_value_type() {
  return {
      {"t.u8", gguf_u8(255)},
      {"t.i8", gguf_i8(-128)},
      {"t.u16", gguf_u16(65535)},
      {"t.i16", gguf_i16(-32768)},
      {"t.u32", gguf_u32(4294967295u)},
      {"t.i32", gguf_i32(std::numeric_limits<int32_t>::min())},
      {"t.f32", gguf_f32(-1.5e-7f)},
      {"t.f32_neg_zero", gguf_f32(-0.f)},
      {"t.f32_inf", gguf_f32(std::numeric_limits<float>::infinity())},
      {"t.bool_true", gguf_bool(true)},
      {"t.bool_false", gguf_bool(false)},
      {"t.string", gguf_string("h\xC3\xA9llo \xF0\x9F\x98\x80")},
      {"t.string_empty", gguf_string("")},
      {"t.string_nul", gguf_string(std::string("a\0b", 3))},
      {"t.u64", gguf_u64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", gguf_i64(std::numeric_limits<int64_t>::min())},
      {"t.f64", gguf_f64(3.141592653589793)},
      {"t.array_empty", gguf_array(GgufValueType::kUint64, {})},
      {"t.array_i16", gguf_array(GgufValueType::kInt16, {gguf_i16(-1), gguf_i16(2), gguf_i16(32767)})},
      {"t.array_f64", gguf_array(GgufValueType::kFloat64, {gguf_f64(0.1), gguf_f64(-2e300)})},
      {"t.array_bool", gguf_array(GgufValueType::kBool, {gguf_bool(true), gguf_bool(false)})},
      {"t.array_string", gguf_string_array({"a", "", "ccc"})},
      {"t.array_nested",
       gguf_array(GgufValueType::kArray,
                  {gguf_array(GgufValueType::kUint8, {gguf_u8(1), gguf_u8(2)}),
                   gguf_array(GgufValueType::kUint8, {}),
                   gguf_array(GgufValueType::kUint8, {gguf_u8(3)})})},
      {"t.array_nested3",
       gguf_array(GgufValueType::kArray,
                  {gguf_array(GgufValueType::kArray, {gguf_string_array({"x", "yz"})})})},
  };
}

class GgufVersionTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(GgufVersionTest, EveryValueTypeRoundTrips) {
  GgufWriter w(GetParam());
  const auto values = every_value_type();
  for (const auto& [key, value] : values) w.add(key, value);
  auto file = GgufFile::from_bytes(w.bytes());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->version(), GetParam());
  ASSERT_EQ((*file)->metadata().size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ((*file)->metadata()[i].first, values[i].first);  // file order kept
    const GgufValue* got = (*file)->find(values[i].first);
    ASSERT_NE(got, nullptr) << values[i].first;
    expect_same_value(values[i].second, *got, values[i].first);
  }
  EXPECT_EQ((*file)->find("t.absent"), nullptr);
  EXPECT_TRUE((*file)->tensors().empty());
}

TEST_P(GgufVersionTest, TensorsAreLaidOutAndDecoded) {
  GgufWriter w(GetParam());
  w.add("general.architecture", gguf_string("llama"));
  const std::vector<float> a = {1.f, -2.f, 3.5f, 0.f, 1e-3f, -7.25f};
  const std::vector<float> b = {0.5f, 0.25f, -0.125f};
  w.add_tensor_f32("a", {3, 2}, a).add_tensor_f32("b", {3}, b);
  auto file = GgufFile::from_bytes(w.bytes());
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 2u);
  const GgufTensorInfo* ta = (*file)->find_tensor("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->dims, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(ta->type, GgmlType::kF32);
  EXPECT_EQ(ta->num_elements, 6);
  EXPECT_EQ(ta->num_bytes, 24u);
  EXPECT_EQ(ta->row_length(), 3);
  EXPECT_EQ(ta->num_rows(), 2);
  EXPECT_EQ(ta->offset, 0u);
  const GgufTensorInfo* tb = (*file)->find_tensor("b");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb->offset, 32u);  // 24 bytes padded to the default alignment 32
  EXPECT_EQ((*file)->find_tensor("c"), nullptr);
  EXPECT_EQ((*file)->data_offset() % 32, 0u);
  auto va = (*file)->dequantize(*ta);
  ASSERT_TRUE(va.ok()) << va.status();
  EXPECT_EQ(*va, a);
  auto vb = (*file)->dequantize(*tb);
  ASSERT_TRUE(vb.ok()) << vb.status();
  EXPECT_EQ(*vb, b);
}

INSTANTIATE_TEST_SUITE_P(Versions, GgufVersionTest, ::testing::Values(2u, 3u));

// dequantize_into resizes its vector to the tensor and, when the size already matches, writes
// into the same memory (the CUDA loader's reuse across layers relies on it).
TEST(GgufReaderTest, DequantizeIntoResizesAndReusesTheVector) {
  GgufWriter w;
  const std::vector<float> a = {1.f, -2.f, 3.5f, 0.f, 1e-3f, -7.25f};
  const std::vector<float> b = {0.5f, 0.25f, -0.125f, 4.f, 8.f, -1.f};
  w.add_tensor_f32("a", {3, 2}, a).add_tensor_f32("b", {3, 2}, b).add_tensor_f32("c", {2}, {6, 7});
  auto file = GgufFile::from_bytes(w.bytes());
  ASSERT_TRUE(file.ok()) << file.status();
  std::vector<float> v(100, 42.f);  // larger: shrinks to the tensor
  ASSERT_TRUE((*file)->dequantize_into(*(*file)->find_tensor("a"), &v).ok());
  EXPECT_EQ(v, a);
  const float* memory = v.data();
  ASSERT_TRUE((*file)->dequantize_into(*(*file)->find_tensor("b"), &v).ok());
  EXPECT_EQ(v, b);
  EXPECT_EQ(v.data(), memory);
  ASSERT_TRUE((*file)->dequantize_into(*(*file)->find_tensor("c"), &v).ok());
  EXPECT_EQ(v, (std::vector<float>{6, 7}));
}

TEST(GgufReaderTest, CustomAlignmentPlacesDataSectionAndOffsets) {
  GgufWriter w;
  w.set_alignment(256);
  w.add_tensor_f32("x", {5}, {1, 2, 3, 4, 5}).add_tensor_f32("y", {1}, {9});
  auto file = GgufFile::from_bytes(w.bytes());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->alignment(), 256u);
  EXPECT_EQ((*file)->data_offset() % 256, 0u);
  EXPECT_EQ((*file)->find_tensor("y")->offset, 256u);
  auto y = (*file)->dequantize(*(*file)->find_tensor("y"));
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(*y, std::vector<float>{9});
}

TEST(GgufReaderTest, DefaultAlignmentIs32) {
  auto file = GgufFile::from_bytes(GgufWriter().bytes());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->alignment(), 32u);
}

TEST(GgufReaderTest, ZeroElementTensorIsAllowed) {
  GgufWriter w;
  w.add_tensor_f32("empty", {0, 4}, {}).add_tensor_f32("x", {1}, {2});
  auto file = GgufFile::from_bytes(w.bytes());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->find_tensor("empty")->num_elements, 0);
  auto v = (*file)->dequantize(*(*file)->find_tensor("empty"));
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->empty());
}

TEST(GgufReaderTest, KnownButUnsupportedTypeOpensAndDequantizeSaysUnimplemented) {
  GgufWriter w;
  w.add_tensor("k", {256}, GgmlType::kIQ2_XXS, std::string(66, '\0'));
  auto file = GgufFile::from_bytes(w.bytes());
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufTensorInfo* t = (*file)->find_tensor("k");
  EXPECT_EQ(t->num_bytes, 66u);
  auto v = (*file)->dequantize(*t);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(v.status().message().find("iq2_xxs"), std::string::npos) << v.status();
}

TEST(GgufReaderTest, CheckTensorTypesNamesTheFirstUnreadableTensor) {
  GgufWriter w;
  w.add_tensor("a", {256}, GgmlType::kQ6_K, std::string(210, '\0'))
      .add_tensor("b", {256}, GgmlType::kIQ4_XS, std::string(136, '\0'))
      .add_tensor("c", {256}, GgmlType::kIQ2_XXS, std::string(66, '\0'))
      .add_tensor("d", {256}, GgmlType::kIQ1_S, std::string(50, '\0'));
  auto file = GgufFile::from_bytes(w.bytes());
  ASSERT_TRUE(file.ok()) << file.status();
  const absl::Status s = check_tensor_types(**file);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(),
            "gguf: tensor 'c' has type iq2_xxs, which flashserve cannot read (supported: f32, f16, bf16, q8_0, "
            "q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs)");

  GgufWriter readable;
  readable.add_tensor("a", {256}, GgmlType::kQ6_K, std::string(210, '\0'))
      .add_tensor_f32("n", {2}, {1, 2});
  auto ok_file = GgufFile::from_bytes(readable.bytes());
  ASSERT_TRUE(ok_file.ok()) << ok_file.status();
  EXPECT_TRUE(check_tensor_types(**ok_file).ok());
}

TEST(GgufReaderTest, OpenMapsAFileFromDisk) {
  GgufWriter w;
  w.add("general.name", gguf_string("tiny")).add_tensor_f32("w", {2}, {4, 5});
  const std::string path = ::testing::TempDir() + "/gguf_reader_test_open.gguf";
  ASSERT_TRUE(w.write_file(path).ok());
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->get_string("general.name").value_or(""), "tiny");
  EXPECT_EQ((*file)->file_size(), w.bytes().size());
  auto v = (*file)->dequantize(*(*file)->find_tensor("w"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<float>{4, 5}));
  std::remove(path.c_str());
}

TEST(GgufReaderTest, OpenMissingFileIsNotFoundNamingThePath) {
  auto file = GgufFile::open("/nonexistent/dir/model.gguf");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("/nonexistent/dir/model.gguf"), std::string::npos);
}

TEST(GgufReaderTest, OpenEmptyFileIsDataLoss) {
  const std::string path = ::testing::TempDir() + "/gguf_reader_test_empty.gguf";
  { std::FILE* f = std::fopen(path.c_str(), "wb"); ASSERT_NE(f, nullptr); std::fclose(f); }
  auto file = GgufFile::open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << file.status();
  std::remove(path.c_str());
}

// ---- typed getters -------------------------------------------------------------------------
class GgufGetterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GgufWriter w;
    w.add("s", gguf_string("text"))
        .add("u8", gguf_u8(7))
        .add("i16", gguf_i16(-3))
        .add("u64_big", gguf_u64(std::numeric_limits<uint64_t>::max()))
        .add("f32", gguf_f32(0.5f))
        .add("b", gguf_bool(true))
        .add("strs", gguf_string_array({"x", "y"}))
        .add("u32s", gguf_array(GgufValueType::kUint32, {gguf_u32(1), gguf_u32(4000000000u)}))
        .add("u64s_big", gguf_array(GgufValueType::kUint64, {gguf_u64(1ull << 63)}))
        .add("f32s", gguf_f32_array({0.25f, -1.f}))
        .add("i32s", gguf_i32_array({-5, 6}));
    auto file = GgufFile::from_bytes(w.bytes());
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::move(*file);
  }
  std::unique_ptr<GgufFile> file_;
};

void expect_error(const absl::Status& s, absl::StatusCode code, std::vector<std::string> needles) {
  EXPECT_EQ(s.code(), code) << s;
  for (const std::string& n : needles) EXPECT_NE(s.message().find(n), std::string::npos) << s << " lacks " << n;
}

TEST_F(GgufGetterTest, ScalarsOfTheRightType) {
  EXPECT_EQ(*file_->get_string("s"), "text");
  EXPECT_EQ(*file_->get_int("u8"), 7);
  EXPECT_EQ(*file_->get_int("i16"), -3);
  EXPECT_EQ(*file_->get_float("f32"), 0.5);
  EXPECT_EQ(*file_->get_float("i16"), -3.0);  // integers are accepted as floats
  EXPECT_EQ(*file_->get_bool("b"), true);
}

TEST_F(GgufGetterTest, ArraysOfTheRightType) {
  EXPECT_EQ(*file_->get_string_array("strs"), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(*file_->get_int_array("u32s"), (std::vector<int64_t>{1, 4000000000}));
  EXPECT_EQ(*file_->get_int_array("i32s"), (std::vector<int64_t>{-5, 6}));
  EXPECT_EQ(*file_->get_float_array("f32s"), (std::vector<float>{0.25f, -1.f}));
  EXPECT_EQ(*file_->get_float_array("i32s"), (std::vector<float>{-5.f, 6.f}));
}

TEST_F(GgufGetterTest, MissingKeyIsNotFoundNamingTheKey) {
  expect_error(file_->get_int("llama.block_count").status(), absl::StatusCode::kNotFound, {"llama.block_count"});
  expect_error(file_->get_string_array("nope").status(), absl::StatusCode::kNotFound, {"nope"});
}

TEST_F(GgufGetterTest, WrongTypeIsInvalidArgumentNamingKeyAndType) {
  expect_error(file_->get_int("s").status(), absl::StatusCode::kInvalidArgument, {"'s'", "string"});
  expect_error(file_->get_string("u8").status(), absl::StatusCode::kInvalidArgument, {"'u8'", "uint8"});
  expect_error(file_->get_int("f32").status(), absl::StatusCode::kInvalidArgument, {"float32"});
  expect_error(file_->get_bool("u8").status(), absl::StatusCode::kInvalidArgument, {"uint8"});
  expect_error(file_->get_float("b").status(), absl::StatusCode::kInvalidArgument, {"bool"});
  expect_error(file_->get_string_array("u32s").status(), absl::StatusCode::kInvalidArgument,
               {"array of uint32"});
  expect_error(file_->get_int_array("strs").status(), absl::StatusCode::kInvalidArgument, {"array of string"});
  expect_error(file_->get_float_array("s").status(), absl::StatusCode::kInvalidArgument, {"string"});
  expect_error(file_->get_int_array("f32s").status(), absl::StatusCode::kInvalidArgument, {"float32"});
}

TEST_F(GgufGetterTest, IntegersOutsideInt64AreRejected) {
  expect_error(file_->get_int("u64_big").status(), absl::StatusCode::kInvalidArgument,
               {"u64_big", "18446744073709551615"});
  expect_error(file_->get_int_array("u64s_big").status(), absl::StatusCode::kInvalidArgument, {"u64s_big"});
  EXPECT_EQ(*file_->get_float("u64_big"), 18446744073709551615.0);
}

}  // namespace
}  // namespace flashserve::model
