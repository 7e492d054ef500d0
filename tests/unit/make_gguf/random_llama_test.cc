// write_random_llama (tools/make_gguf/random_llama.h): files that model::load_model accepts,
// with the shape asked for, every weight type, the source's tokenizer keys byte for byte,
// finite logits through many layers, weights of the documented scale, and bytes that depend
// on the seed only.
#include "tools/make_gguf/random_llama.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "make_gguf_test_util.h"
#include "model/gguf/gguf.h"
#include "model/gguf/gguf_writer.h"
#include "model/model_loader.h"

namespace flashserve::tools {
namespace {

using model::GgmlType;
using model::GgufFile;

RandomLlamaOptions tiny_options(const std::string& source, const std::string& out, GgmlType type) {
  RandomLlamaOptions o;
  o.tokenizer_from = source;
  o.out = out;
  o.name = "tiny";
  o.shape = {2, 64, 4, 2, 128, 512, 100000.f, 1e-5f, true};
  o.weight_type = type;
  o.seed = 7;
  o.num_threads = 2;
  return o;
}

model::LoadedModel load(const std::string& path) {
  model::LoadOptions options;
  options.device = model::Device::kCpu;  // the reference backend, on every machine
  options.num_kv_blocks = 8;
  options.num_threads = 1;
  absl::StatusOr<model::LoadedModel> loaded = model::load_model(path, options);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  return loaded.ok() ? std::move(*loaded) : model::LoadedModel{};
}

std::string encoded(const model::GgufValue& v) {
  std::string out;
  model::GgufWriter::put_value(&out, v);
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Every tokenizer.* key of `source` is in `out` with the same type and bytes, in order.
void expect_same_tokenizer_keys(const GgufFile& source, const GgufFile& out) {
  int num_keys = 0;
  for (const auto& [key, value] : source.metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    ++num_keys;
    const model::GgufValue* copied = out.find(key);
    ASSERT_NE(copied, nullptr) << key;
    EXPECT_EQ(copied->type, value.type) << key;
    EXPECT_TRUE(encoded(*copied) == encoded(value)) << key << " differs";
  }
  EXPECT_GT(num_keys, 0);
  int num_out_keys = 0;
  for (const auto& [key, value] : out.metadata()) num_out_keys += key.starts_with("tokenizer.") ? 1 : 0;
  EXPECT_EQ(num_out_keys, num_keys);
}

class RandomLlamaTypeTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(RandomLlamaTypeTest, RealTokenizerLoadsRunsAndRoundTrips) {
  if (!std::filesystem::exists(kModelPath)) GTEST_SKIP() << kModelPath << " is absent";
  const GgmlType type = GetParam();
  const std::string out = temp_path(model::ggml_type_name(type) + ".gguf");
  RandomLlamaOptions o = tiny_options(kModelPath, out, type);
  o.shape.tied_embeddings = type != GgmlType::kQ8_0;  // one untied file: output.weight is written
  absl::StatusOr<RandomLlamaSummary> summary = write_random_llama(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->file_bytes, std::filesystem::file_size(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".part"));

  model::LoadedModel m = load(out);
  ASSERT_NE(m.runner, nullptr);
  model::LoadedModel source = load(kModelPath);
  ASSERT_NE(source.tokenizer, nullptr);
  const model::ModelConfig& c = m.config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.ffn_size, 128);
  EXPECT_EQ(c.context_length, 512);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.tied_embeddings, o.shape.tied_embeddings);
  EXPECT_EQ(c.vocab_size, source.config.vocab_size);
  EXPECT_EQ(summary->vocab_size, c.vocab_size);
  EXPECT_EQ(m.file->find_tensor("blk.1.ffn_down.weight")->type, type);
  EXPECT_EQ(m.file->find_tensor("token_embd.weight")->type, type);
  EXPECT_EQ(m.file->find_tensor("blk.1.ffn_norm.weight")->type, GgmlType::kF32);
  EXPECT_EQ(m.file->find_tensor("output.weight") != nullptr, !o.shape.tied_embeddings);
  expect_same_tokenizer_keys(*source.file, *m.file);

  // The tokenizer and chat template behave as the source's.
  ASSERT_TRUE(m.chat_template.has_value());
  EXPECT_EQ(m.chat_template->family_name(), source.chat_template->family_name());
  for (const std::string text : {"The capital of France is", "<|im_start|>user\nHi, ça va? 日本語<|im_end|>\n",
                                 "  tabs\tand\nnewlines 12345 !!"}) {
    const std::vector<int32_t> ids = m.tokenizer->encode(text, true, true);
    EXPECT_EQ(ids, source.tokenizer->encode(text, true, true)) << text;
    EXPECT_EQ(m.tokenizer->decode(ids, false), source.tokenizer->decode(ids, false));
    EXPECT_EQ(m.tokenizer->decode(ids, false), text);  // SmolLM2 adds no BOS
  }

  const std::vector<float> logits =
      prefill_and_decode(m.runner.get(), m.tokenizer->encode("The capital of France is", true, false), 3);
  ASSERT_EQ(logits.size(), 4u * c.vocab_size);
  double sum_sq = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    sum_sq += double(v) * v;
  }
  // Logits of a random model: std 0.02 * sqrt(64) * |normed hidden| ~ 0.16; far from 0 and inf.
  const double rms = std::sqrt(sum_sq / logits.size());
  EXPECT_GT(rms, 0.02);
  EXPECT_LT(rms, 10.0);
}

INSTANTIATE_TEST_SUITE_P(EveryType, RandomLlamaTypeTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0,
                                           GgmlType::kQ4_0, GgmlType::kQ4_1),
                         [](const auto& info) { return model::ggml_type_name(info.param); });

TEST(RandomLlamaTest, SyntheticTokenizerWithoutTheModel) {
  const std::string source = write_synthetic_tokenizer("synthetic_vocab.gguf");
  const std::string out = temp_path("synthetic.gguf");
  ASSERT_TRUE(write_random_llama(tiny_options(source, out, GgmlType::kQ4_1)).ok());
  model::LoadedModel m = load(out);
  ASSERT_NE(m.runner, nullptr);
  EXPECT_EQ(m.config.vocab_size, 260);
  EXPECT_FALSE(m.chat_template.has_value());
  // "hel" is merge token 257; 'l' and 'o' are the byte tokens of their byte values.
  EXPECT_EQ(m.tokenizer->encode("hello", false, false), (std::vector<int32_t>{257, 'l', 'o'}));
  absl::StatusOr<std::unique_ptr<GgufFile>> source_file = GgufFile::open(source);
  ASSERT_TRUE(source_file.ok());
  expect_same_tokenizer_keys(**source_file, *m.file);
}

// 32 layers of the documented scale stay finite and keep logits in a real model's range.
TEST(RandomLlamaTest, ThirtyTwoLayersStayFinite) {
  const std::string source = write_synthetic_tokenizer("synthetic_vocab_deep.gguf");
  const std::string out = temp_path("deep.gguf");
  RandomLlamaOptions o = tiny_options(source, out, GgmlType::kQ4_0);
  o.shape = {32, 256, 4, 1, 768, 512, 500000.f, 1e-5f, false};  // head_dim 64, GQA 4:1
  ASSERT_TRUE(write_random_llama(o).ok());
  model::LoadedModel m = load(out);
  ASSERT_NE(m.runner, nullptr);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 37) % 260);
  const std::vector<float> logits = prefill_and_decode(m.runner.get(), prompt, 2);
  ASSERT_EQ(logits.size(), 3u * 260);
  double sum_sq = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    sum_sq += double(v) * v;
  }
  const double rms = std::sqrt(sum_sq / logits.size());
  EXPECT_GT(rms, 0.05);
  EXPECT_LT(rms, 20.0);
}

// Values follow the documented distributions: weights N(0, 0.02^2), norms 1 + N(0, 0.02^2).
TEST(RandomLlamaTest, WeightsHaveTheDocumentedScale) {
  const std::string source = write_synthetic_tokenizer("synthetic_vocab_scale.gguf");
  const std::string out = temp_path("scale.gguf");
  ASSERT_TRUE(write_random_llama(tiny_options(source, out, GgmlType::kF32)).ok());
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::open(out);
  ASSERT_TRUE(file.ok()) << file.status();
  for (const auto& [name, mean] : {std::pair<const char*, double>{"blk.0.ffn_up.weight", 0.0},
                                   {"token_embd.weight", 0.0}, {"blk.1.attn_norm.weight", 1.0}}) {
    absl::StatusOr<std::vector<float>> v = (*file)->dequantize(*(*file)->find_tensor(name));
    ASSERT_TRUE(v.ok());
    double sum = 0, sum_sq = 0;
    for (float x : *v) sum += x;
    const double m = sum / v->size();
    for (float x : *v) sum_sq += (x - m) * (x - m);
    const double std = std::sqrt(sum_sq / v->size());
    EXPECT_NEAR(m, mean, 4 * 0.02 / std::sqrt(double(v->size()))) << name;
    EXPECT_NEAR(std, 0.02, 0.02 * (v->size() > 1000 ? 0.05 : 0.3)) << name;
  }
}

TEST(RandomLlamaTest, BytesDependOnTheSeedOnly) {
  const std::string source = write_synthetic_tokenizer("synthetic_vocab_seed.gguf");
  RandomLlamaOptions o = tiny_options(source, temp_path("seed_a.gguf"), GgmlType::kQ8_0);
  o.num_threads = 1;
  ASSERT_TRUE(write_random_llama(o).ok());
  o.out = temp_path("seed_b.gguf");
  o.num_threads = 3;
  ASSERT_TRUE(write_random_llama(o).ok());
  o.out = temp_path("seed_c.gguf");
  o.seed = 8;
  ASSERT_TRUE(write_random_llama(o).ok());
  const std::string a = read_file(temp_path("seed_a.gguf"));
  EXPECT_GT(a.size(), 100000u);
  EXPECT_TRUE(a == read_file(temp_path("seed_b.gguf"))) << "1 and 3 threads wrote different bytes";
  EXPECT_FALSE(a == read_file(temp_path("seed_c.gguf"))) << "seeds 7 and 8 wrote the same bytes";
}

TEST(RandomLlamaTest, VocabOnlyFileIsATokenizerSource) {
  if (!std::filesystem::exists(kModelPath)) GTEST_SKIP() << kModelPath << " is absent";
  RandomLlamaOptions o = tiny_options(kModelPath, temp_path("vocab_only.gguf"), GgmlType::kQ4_1);
  o.vocab_only = true;
  absl::StatusOr<RandomLlamaSummary> summary = write_random_llama(o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->num_tensors, 0);
  EXPECT_LT(summary->file_bytes, 4u << 20);  // small enough to carry in any device call
  const std::string out = temp_path("from_vocab_only.gguf");
  ASSERT_TRUE(write_random_llama(tiny_options(o.out, out, GgmlType::kQ4_1)).ok());
  model::LoadedModel m = load(out);
  model::LoadedModel source = load(kModelPath);
  ASSERT_NE(m.tokenizer, nullptr);
  expect_same_tokenizer_keys(*source.file, *m.file);
}

}  // namespace
}  // namespace flashserve::tools
