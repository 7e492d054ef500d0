// GgufFile on corrupt, truncated and hostile images: each must give a clear error (code and
// message naming the problem), never a crash, UB or a giant allocation. Run this binary
// under -DFLASHSERVE_SANITIZE=ON (ASan + UBSan) as well.
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf.h"
#include "tests/support/gguf_writer.h"

namespace flashserve::model {
namespace {

using namespace flashserve::testing;

std::string u32(uint32_t v) { std::string s; GgufWriter::put_u32(&s, v); return s; }
std::string u64(uint64_t v) { std::string s; GgufWriter::put_u64(&s, v); return s; }
std::string str(const std::string& v) { std::string s; GgufWriter::put_string(&s, v); return s; }
std::string header(uint32_t version, uint64_t num_tensors, uint64_t num_kv) {
  return "GGUF" + u32(version) + u64(num_tensors) + u64(num_kv);
}
constexpr uint32_t kTypeArray = 9;
constexpr uint32_t kTypeString = 8;

struct HostileCase {
  std::string name;
  std::function<std::string()> build;
  absl::StatusCode code;
  std::string message_part;
};

std::vector<HostileCase> hostile_cases() {
  using C = absl::StatusCode;
  return {
      {"empty file", [] { return std::string(); }, C::kDataLoss, "too small"},
      {"three bytes", [] { return std::string("GGU"); }, C::kDataLoss, "too small"},
      {"bad magic", [] { return GgufWriter().set_magic(0x46554746).bytes(); }, C::kInvalidArgument, "bad magic"},
      {"version 1", [] { return GgufWriter(1).bytes(); }, C::kUnimplemented, "version 1"},
      {"version 4", [] { return GgufWriter(4).bytes(); }, C::kUnimplemented, "version 4"},
      {"big-endian file", [] { return GgufWriter(0x03000000).bytes(); }, C::kUnimplemented, "big-endian"},
      {"header cut after version", [] { return header(3, 0, 0).substr(0, 12); }, C::kDataLoss, "tensor count"},
      {"huge metadata count", [] { return GgufWriter().override_num_kv(uint64_t{1} << 60).bytes(); },
       C::kDataLoss, "1152921504606846976 metadata entries"},
      {"huge tensor count", [] { return GgufWriter().override_num_tensors(~uint64_t{0}).bytes(); },
       C::kDataLoss, "18446744073709551615 tensors"},
      {"key length past the end", [] { return header(3, 0, 1) + u64(1000) + "ab" + u32(0) + "x"; },
       C::kDataLoss, "length 1000"},
      {"key length 2^64-1", [] { return header(3, 0, 1) + u64(~uint64_t{0}) + std::string(12, 'k'); },
       C::kDataLoss, "18446744073709551615"},
      {"string value length past the end", [] { return GgufWriter().add_raw("k", kTypeString, u64(uint64_t{1} << 40) + "abc").bytes(); },
       C::kDataLoss, "string value of 'k'"},
      {"unknown value type", [] { return GgufWriter().add_raw("k", 13, u32(0)).bytes(); },
       C::kDataLoss, "'k' has unknown value type 13"},
      {"unknown array element type", [] { return GgufWriter().add_raw("k", kTypeArray, u32(77) + u64(0)).bytes(); },
       C::kDataLoss, "unknown element type 77"},
      {"array count past the end", [] { return GgufWriter().add_raw("k", kTypeArray, u32(4) + u64(1000) + u32(1)).bytes(); },
       C::kDataLoss, "'k' claims 1000 elements"},
      {"array count * element size overflows", [] { return GgufWriter().add_raw("k", kTypeArray, u32(10) + u64(uint64_t{1} << 61) + u64(1)).bytes(); },
       C::kDataLoss, "2305843009213693952 elements"},
      {"string array count huge", [] { return GgufWriter().add_raw("k", kTypeArray, u32(kTypeString) + u64(~uint64_t{0} / 2)).bytes(); },
       C::kDataLoss, "claims"},
      {"nested array count huge", [] { return GgufWriter().add_raw("k", kTypeArray, u32(kTypeArray) + u64(uint64_t{1} << 62)).bytes(); },
       C::kDataLoss, "claims"},
      {"nested array depth bomb", [] {
         std::string payload;
         for (int i = 0; i < 10000; ++i) payload += u32(kTypeArray) + u64(1);
         payload += u32(0) + u64(0);
         return GgufWriter().add_raw("k", kTypeArray, payload).bytes();
       }, C::kInvalidArgument, "nested deeper than"},
      {"too many array elements in total", [] {
         return GgufWriter().add_raw("k", kTypeArray, u32(0) + u64(5'000'000) + std::string(5'000'000, '\0')).bytes();
       }, C::kInvalidArgument, "more than 4194304 elements"},
      {"bool value 2", [] { return GgufWriter().add_raw("k", 7, std::string(1, '\2')).bytes(); },
       C::kDataLoss, "bool value of 'k' is 2"},
      {"truncated scalar", [] { return header(3, 0, 1) + str("k") + u32(10) + "abc"; },
       C::kDataLoss, "value of 'k'"},
      {"duplicate key", [] { return GgufWriter().add("a", gguf_u8(1)).add("b", gguf_u8(2)).add("a", gguf_u8(3)).bytes(); },
       C::kInvalidArgument, "duplicate metadata key 'a'"},
      {"alignment 0", [] { return GgufWriter().add("general.alignment", gguf_u32(0)).bytes(); },
       C::kInvalidArgument, "general.alignment 0 is not a non-zero power of two"},
      {"alignment 48", [] { return GgufWriter().add("general.alignment", gguf_u32(48)).bytes(); },
       C::kInvalidArgument, "general.alignment 48"},
      {"alignment negative", [] { return GgufWriter().add("general.alignment", gguf_i32(-32)).bytes(); },
       C::kInvalidArgument, "general.alignment -32"},
      {"alignment 2^63", [] { return GgufWriter().add("general.alignment", gguf_u64(uint64_t{1} << 63)).bytes(); },
       C::kInvalidArgument, "9223372036854775808"},
      {"alignment as string", [] { return GgufWriter().add("general.alignment", gguf_string("32")).bytes(); },
       C::kInvalidArgument, "general.alignment has type string"},
      {"tensor with 5 dims", [] { return GgufWriter().add_tensor_raw("t", {1, 1, 1, 1, 1}, 0, std::string(4, '\0')).bytes(); },
       C::kInvalidArgument, "'t' has 5 dimensions"},
      {"tensor n_dims 2^32-1", [] { return header(3, 1, 0) + str("t") + u32(~0u) + std::string(64, '\0'); },
       C::kInvalidArgument, "4294967295 dimensions"},
      {"dims product overflows", [] { return GgufWriter().add_tensor_raw("t", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, "").bytes(); },
       C::kInvalidArgument, "overflow"},
      {"dim above int64", [] { return GgufWriter().add_tensor_raw("t", {~uint64_t{0}}, 0, "").bytes(); },
       C::kInvalidArgument, "overflow"},
      {"byte size overflows", [] { return GgufWriter().add_tensor_raw("t", {uint64_t{1} << 62}, 28 /*f64*/, "").bytes(); },
       C::kInvalidArgument, "'t' byte size overflows"},
      {"unknown tensor type", [] { return GgufWriter().add_tensor_raw("t", {4}, 99, std::string(16, '\0')).bytes(); },
       C::kUnimplemented, "'t' has unknown ggml type 99"},
      {"removed tensor type 4", [] { return GgufWriter().add_tensor_raw("t", {32}, 4, std::string(20, '\0')).bytes(); },
       C::kUnimplemented, "unknown ggml type 4"},
      {"row not a whole number of blocks", [] { return GgufWriter().add_tensor_raw("t", {33}, 2 /*q4_0*/, std::string(36, '\0')).bytes(); },
       C::kInvalidArgument, "row length 33"},
      {"tensor data truncated", [] { return GgufWriter().add_tensor_raw("t", {64}, 0, std::string(40, '\0')).bytes(); },
       C::kDataLoss, "'t' data (256 bytes at data offset 0)"},
      {"tensor offset past the end", [] { return GgufWriter().add_tensor_raw("t", {1}, 0, std::string(4, '\0'), uint64_t{1} << 40).bytes(); },
       C::kDataLoss, "past the end of the data section"},
      {"tensor offset + size overflows", [] { return GgufWriter().add_tensor_raw("t", {8}, 0, std::string(4, '\0'), ~uint64_t{31}).bytes(); },
       C::kDataLoss, "past the end"},
      {"unaligned tensor offset", [] { return GgufWriter().add_tensor_raw("t", {1}, 0, std::string(36, '\0'), 4).bytes(); },
       C::kInvalidArgument, "offset 4 is not a multiple of the alignment 32"},
      {"duplicate tensor name", [] { return GgufWriter().add_tensor_f32("w", {1}, {1}).add_tensor_f32("w", {1}, {2}).bytes(); },
       C::kInvalidArgument, "duplicate tensor name 'w'"},
      {"tensor count larger than table", [] { return header(3, 2, 0) + str("t") + u32(1) + u64(1) + u32(0) + u64(0); },
       C::kDataLoss, "2 tensors but only 33 bytes remain"},
      {"tensor name length past the end", [] { return header(3, 1, 0) + u64(1 << 20) + std::string(24, 'n'); },
       C::kDataLoss, "name of tensor 0"},
      {"data section missing", [] { return header(3, 1, 0) + str("t") + u32(1) + u64(1) + u32(0) + u64(0); },
       C::kDataLoss, "data section starts at"},
  };
}

TEST(GgufHostileTest, EachCaseGivesItsError) {
  for (const HostileCase& c : hostile_cases()) {
    SCOPED_TRACE(c.name);
    auto file = GgufFile::from_bytes(c.build());
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), c.code) << file.status();
    EXPECT_NE(file.status().message().find(c.message_part), std::string::npos)
        << file.status() << "\n  expected to contain: " << c.message_part;
    EXPECT_EQ(file.status().message().rfind("gguf: ", 0), 0u) << file.status();
  }
}

// A valid file with every kind of content; its last tensor's data ends the file.
std::string valid_file() {
  GgufWriter w;
  w.set_alignment(64)
      .add("general.architecture", gguf_string("llama"))
      .add("u64", gguf_u64(5))
      .add("f64", gguf_f64(0.5))
      .add("b", gguf_bool(true))
      .add("strs", gguf_string_array({"alpha", "", "gamma"}))
      .add("nested", gguf_array(GgufValueType::kArray, {gguf_i32_array({1, 2}), gguf_i32_array({})}))
      .add("f32s", gguf_f32_array({1.f, 2.f}));
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.1f * i - 3.f;
  w.add_tensor_f32("f32", {4, 2}, std::vector<float>(x.begin(), x.begin() + 8));
  w.add_tensor_f16("f16", {8}, std::vector<float>(x.begin(), x.begin() + 8));
  w.add_tensor_q8_0("q8", {32, 2}, x);
  w.add_tensor_q4_0("q40", {64}, x);
  w.add_tensor_q4_1("q41", {32, 2}, x);
  return w.bytes();
}

TEST(GgufHostileTest, ValidFileParses) {
  auto file = GgufFile::from_bytes(valid_file());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().size(), 5u);
  for (const GgufTensorInfo& t : (*file)->tensors()) EXPECT_TRUE((*file)->dequantize(t).ok()) << t.name;
}

// Every proper prefix of a valid file is a truncated file: DataLoss, never a crash.
TEST(GgufHostileTest, TruncationAtEveryByteIsDataLoss) {
  const std::string bytes = valid_file();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto file = GgufFile::from_bytes(bytes.substr(0, n));
    ASSERT_FALSE(file.ok()) << "prefix of " << n << " bytes parsed";
    ASSERT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << n << ": " << file.status();
  }
}

// Random byte corruption: any outcome but a crash (the sanitizer build checks for UB).
TEST(GgufHostileTest, RandomCorruptionNeverCrashes) {
  const std::string bytes = valid_file();
  std::mt19937 rng(12345);
  int num_ok = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string corrupt = bytes;
    const int num_flips = 1 + trial % 4;
    for (int f = 0; f < num_flips; ++f) {
      corrupt[rng() % corrupt.size()] = static_cast<char>(rng() & 0xFF);
    }
    auto file = GgufFile::from_bytes(std::move(corrupt));
    if (!file.ok()) continue;
    ++num_ok;
    for (const GgufTensorInfo& t : (*file)->tensors()) {
      auto values = (*file)->dequantize(t);
      if (values.ok()) {
        EXPECT_EQ(values->size(), static_cast<size_t>(t.num_elements));
      }
    }
  }
  // Most flips land in tensor data or string bytes and leave a valid file.
  EXPECT_GT(num_ok, 0);
}

}  // namespace
}  // namespace flashserve::model
