// The GGUF reader on the real default model (skipped when models/ lacks it): its config,
// tensor table, tokenizer arrays, and dequantization compared bit for bit with the PyPI
// `gguf` package (tests/data/gguf_smollm2_samples.txt, see tests/data/README.md).
#include <bit>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/config.h"
#include "model/gguf/dequant.h"
#include "model/gguf/gguf.h"

namespace flashserve::model {
namespace {

constexpr char kModelPath[] = FLASHSERVE_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr char kGoldenPath[] = FLASHSERVE_SOURCE_DIR "/tests/data/gguf_smollm2_samples.txt";

class SmolLm2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::FILE* f = std::fopen(kModelPath, "rb")) {
      std::fclose(f);
      auto file = GgufFile::open(kModelPath);
      ASSERT_TRUE(file.ok()) << file.status();
      file_ = std::move(*file).release();
    }
  }
  static void TearDownTestSuite() {
    delete file_;
    file_ = nullptr;
  }
  void SetUp() override {
    if (file_ == nullptr) GTEST_SKIP() << kModelPath << " is absent (scripts/fetch-model.sh fetches it)";
  }
  static GgufFile* file_;
};
GgufFile* SmolLm2Test::file_ = nullptr;

TEST_F(SmolLm2Test, Config) {
  auto c = config_from_gguf(*file_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->ffn_size, 1536);
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->context_length, 8192);
  EXPECT_EQ(c->rope_theta, 100000.f);
  EXPECT_EQ(c->rms_eps, 1e-5f);
  EXPECT_TRUE(c->tied_embeddings);
}

TEST_F(SmolLm2Test, HeaderAndTensorTable) {
  EXPECT_EQ(file_->version(), 3u);
  EXPECT_EQ(file_->alignment(), 32u);
  EXPECT_EQ(file_->metadata().size(), 33u);
  EXPECT_EQ(file_->tensors().size(), 272u);
  const GgufTensorInfo* embd = file_->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::kQ8_0);
  EXPECT_EQ(embd->dims, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(embd->num_bytes, 576u / 32 * 34 * 49152);
  const GgufTensorInfo* k = file_->find_tensor("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->type, GgmlType::kQ4_1);
  EXPECT_EQ(k->dims, (std::vector<int64_t>{576, 192}));  // 3 KV heads x 64
  const GgufTensorInfo* down = file_->find_tensor("blk.29.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->dims, (std::vector<int64_t>{1536, 576}));
  const GgufTensorInfo* norm = file_->find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, GgmlType::kF32);
  EXPECT_EQ(file_->find_tensor("output.weight"), nullptr);
  for (const GgufTensorInfo& t : file_->tensors()) {
    EXPECT_TRUE(ggml_type_can_dequantize(t.type)) << t.name;
    EXPECT_EQ(t.offset % 32, 0u) << t.name;
  }
}

TEST_F(SmolLm2Test, TokenizerArrays) {
  auto tokens = file_->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 49152u);
  EXPECT_EQ((*tokens)[0], "<|endoftext|>");
  EXPECT_EQ((*tokens)[1], "<|im_start|>");
  EXPECT_EQ((*tokens)[2], "<|im_end|>");
  auto merges = file_->get_string_array("tokenizer.ggml.merges");
  ASSERT_TRUE(merges.ok()) << merges.status();
  EXPECT_EQ(merges->size(), 48900u);
  auto types = file_->get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_EQ(types->size(), 49152u);
  EXPECT_EQ(*file_->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*file_->get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(*file_->get_bool("tokenizer.ggml.add_bos_token"), false);
}

uint64_t fnv1a64(const std::vector<float>& values) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (float v : values) {
    const uint32_t bits = std::bit_cast<uint32_t>(v);
    for (int i = 0; i < 4; ++i) {
      h ^= (bits >> (8 * i)) & 0xFF;
      h *= 0x100000001B3ull;
    }
  }
  return h;
}

// Every tensor and sample of the golden, compared bit for bit with our dequantization.
TEST_F(SmolLm2Test, DequantizationMatchesGgufPythonPackageExactly) {
  std::ifstream golden(kGoldenPath);
  ASSERT_TRUE(golden) << kGoldenPath;
  std::map<std::string, std::vector<float>> decoded;
  int num_tensors = 0, num_samples = 0;
  std::string line;
  while (std::getline(golden, line)) {
    std::istringstream in(line);
    std::string kind, name;
    if (!(in >> kind >> name) || kind[0] == '#') continue;
    const GgufTensorInfo* t = file_->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    if (kind == "tensor") {
      std::string type;
      size_t num_dims = 0;
      in >> type >> num_dims;
      std::vector<int64_t> dims(num_dims);
      for (int64_t& d : dims) in >> d;
      std::string hash;
      in >> hash;
      EXPECT_EQ(t->dims, dims) << name;
      auto values = file_->dequantize(*t);
      ASSERT_TRUE(values.ok()) << values.status();
      char ours[17];
      std::snprintf(ours, sizeof(ours), "%016llx", static_cast<unsigned long long>(fnv1a64(*values)));
      EXPECT_EQ(ours, hash) << name << " (" << type << ") differs from the gguf package";
      decoded[name] = std::move(*values);
      ++num_tensors;
    } else if (kind == "sample") {
      size_t index = 0;
      std::string bits_hex;
      in >> index >> bits_hex;
      ASSERT_TRUE(decoded.count(name)) << name;
      ASSERT_LT(index, decoded[name].size());
      const uint32_t want = static_cast<uint32_t>(std::stoul(bits_hex, nullptr, 16));
      EXPECT_EQ(std::bit_cast<uint32_t>(decoded[name][index]), want) << name << "[" << index << "]";
      ++num_samples;
    }
  }
  EXPECT_EQ(num_tensors, 5);
  EXPECT_EQ(num_samples, 5 * 128);
}

// The forward pass may decode one row at a time: rows must decode as in the whole tensor.
TEST_F(SmolLm2Test, RowByRowEqualsWholeTensor) {
  const GgufTensorInfo* t = file_->find_tensor("blk.0.attn_v.weight");
  ASSERT_NE(t, nullptr);
  auto whole = file_->dequantize(*t);
  ASSERT_TRUE(whole.ok());
  const int64_t row_bytes = t->row_length() / 32 * ggml_type_traits(t->type).block_bytes;
  std::vector<float> row(t->row_length());
  for (int64_t r = 0; r < t->num_rows(); r += 37) {
    ASSERT_TRUE(dequantize_row(t->type, t->data + r * row_bytes, t->row_length(), row.data()).ok());
    for (int64_t i = 0; i < t->row_length(); ++i) {
      ASSERT_EQ(row[i], (*whole)[r * t->row_length() + i]) << r << "," << i;
    }
  }
}

// Prefixes of the real file that end inside its metadata, tensor table or first tensors are
// truncated files: DataLoss, whatever structure the cut lands in.
TEST_F(SmolLm2Test, TruncatedPrefixesAreDataLoss) {
  std::ifstream in(kModelPath, std::ios::binary);
  const uint64_t prefix_size = file_->data_offset() + 4096;
  std::string head(prefix_size, '\0');
  ASSERT_TRUE(in.read(head.data(), static_cast<std::streamsize>(prefix_size)));
  for (uint64_t n = 0; n < prefix_size; n += 1 + n / 16 + 7919 % (n + 13)) {
    auto file = GgufFile::from_bytes(head.substr(0, n));
    ASSERT_FALSE(file.ok()) << n;
    ASSERT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << n << ": " << file.status();
  }
}

}  // namespace
}  // namespace flashserve::model
