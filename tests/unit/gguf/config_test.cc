// config_from_gguf on synthetic files: required keys, defaults, validation errors naming
// the key, architectures.
#include "model/config.h"

#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf.h"
#include "tests/support/gguf_writer.h"

namespace flashserve::model {
namespace {

using namespace flashserve::testing;

struct Options {
  std::string arch = "llama";
  bool with_kv_heads = true;
  bool with_output = false;
  bool with_rope_and_eps = true;
  int num_heads = 4;
  int num_kv_heads = 2;
  int hidden = 32;
  int vocab = 10;
};

// A minimal Llama-family file whose tensors carry no data the config reads.
GgufWriter llama_writer(const Options& o) {
  GgufWriter w;
  const std::string p = o.arch + ".";
  w.add("general.architecture", gguf_string(o.arch))
      .add("general.name", gguf_string("tiny"))
      .add(p + "block_count", gguf_u32(2))
      .add(p + "context_length", gguf_u32(128))
      .add(p + "embedding_length", gguf_u32(o.hidden))
      .add(p + "feed_forward_length", gguf_u64(96))
      .add(p + "attention.head_count", gguf_u32(o.num_heads));
  if (o.with_kv_heads) w.add(p + "attention.head_count_kv", gguf_u32(o.num_kv_heads));
  if (o.with_rope_and_eps) {
    w.add(p + "rope.freq_base", gguf_f32(500000.f)).add(p + "attention.layer_norm_rms_epsilon", gguf_f32(1e-6f));
  }
  w.add_tensor_f32("token_embd.weight", {static_cast<uint64_t>(o.hidden), static_cast<uint64_t>(o.vocab)},
                   std::vector<float>(o.hidden * o.vocab, 0.f));
  if (o.with_output) {
    w.add_tensor_f32("output.weight", {static_cast<uint64_t>(o.hidden), static_cast<uint64_t>(o.vocab)},
                     std::vector<float>(o.hidden * o.vocab, 0.f));
  }
  return w;
}

absl::StatusOr<ModelConfig> config_of(const GgufWriter& w) {
  auto file = GgufFile::from_bytes(w.bytes());
  if (!file.ok()) return file.status();
  return config_from_gguf(**file);
}

void expect_error(const absl::StatusOr<ModelConfig>& c, absl::StatusCode code, const std::string& part) {
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), code) << c.status();
  EXPECT_NE(c.status().message().find(part), std::string::npos) << c.status() << " lacks " << part;
}

TEST(ConfigTest, ReadsEveryField) {
  auto c = config_of(llama_writer({}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->name, "tiny");
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->hidden_size, 32);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->ffn_size, 96);
  EXPECT_EQ(c->vocab_size, 10);
  EXPECT_EQ(c->context_length, 128);
  EXPECT_EQ(c->rope_theta, 500000.f);
  EXPECT_EQ(c->rms_eps, 1e-6f);
  EXPECT_TRUE(c->tied_embeddings);
}

TEST(ConfigTest, DefaultsForOptionalKeys) {
  Options o;
  o.with_kv_heads = false;
  o.with_rope_and_eps = false;
  auto c = config_of(llama_writer(o));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_kv_heads, 4);  // head_count_kv defaults to head_count
  EXPECT_EQ(c->rope_theta, 10000.f);
  EXPECT_EQ(c->rms_eps, 1e-5f);
}

TEST(ConfigTest, OutputWeightUntiesEmbeddings) {
  Options o;
  o.with_output = true;
  auto c = config_of(llama_writer(o));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->tied_embeddings);
}

TEST(ConfigTest, KeyLengthOverridesHeadDim) {
  GgufWriter w = llama_writer({});
  w.add("llama.attention.key_length", gguf_u32(16)).add("llama.attention.value_length", gguf_u32(16));
  auto c = config_of(w);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 16);
}

TEST(ConfigTest, ValueLengthDifferentFromKeyLengthIsUnimplemented) {
  GgufWriter w = llama_writer({});
  w.add("llama.attention.key_length", gguf_u32(16)).add("llama.attention.value_length", gguf_u32(8));
  expect_error(config_of(w), absl::StatusCode::kUnimplemented, "value_length");
}

TEST(ConfigTest, Qwen2AndMistralKeysReadTheSameWay) {
  for (const char* arch : {"qwen2", "mistral"}) {
    Options o;
    o.arch = arch;
    auto c = config_of(llama_writer(o));
    ASSERT_TRUE(c.ok()) << arch << ": " << c.status();
    EXPECT_EQ(c->architecture, arch);
    EXPECT_EQ(c->num_kv_heads, 2);
  }
}

// Gemma 3's block is data: the embedding scale, post-norms, GeGLU, Q/K norms on HF-order
// rows, and five local layers of every six with the file's window (model/config.h).
TEST(ConfigTest, Gemma3ReadsItsBlockAndLocalLayers) {
  Options o;
  o.arch = "gemma3";
  GgufWriter w = llama_writer(o);
  w.add("gemma3.attention.sliding_window", gguf_u32(512));
  auto c = config_of(w);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FLOAT_EQ(c->embedding_scale, std::sqrt(32.f));
  EXPECT_TRUE(c->post_norms && c->gelu_ffn && c->qk_norm && c->neox_rows);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->sliding_window, 512);
  for (int layer = 0; layer < 12; ++layer) {
    EXPECT_EQ(c->layer_is_local(layer), layer != 5 && layer != 11) << layer;
  }
  EXPECT_FLOAT_EQ(c->softmax_scale(), 1.f / std::sqrt(8.f));  // head_dim 32 / 4
  EXPECT_FLOAT_EQ(c->rope_theta_local, 10000.f);
}

// Phi-3: fused tensors, HF-order rows, and the file's window on every layer.
TEST(ConfigTest, Phi3FusesProjectionsAndWindowsEveryLayer) {
  Options o;
  o.arch = "phi3";
  GgufWriter w = llama_writer(o);
  w.add("phi3.attention.sliding_window", gguf_u32(2047));
  auto c = config_of(w);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->fused_projections && c->neox_rows);
  EXPECT_FALSE(c->post_norms || c->gelu_ffn || c->qk_norm || c->qkv_bias);
  EXPECT_EQ(c->sliding_window, 2047);
  for (int layer = 0; layer < 8; ++layer) EXPECT_TRUE(c->layer_is_local(layer)) << layer;
  auto plain = config_of(llama_writer(o));  // no window key: no local layer
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->layer_is_local(0));
}

// attention.sliding_window_pattern: a period replaces the architecture's; llama.cpp's
// per-layer bools must match it.
TEST(ConfigTest, AStatedWindowPatternIsReadOrRefused) {
  Options o;
  o.arch = "gemma3";
  auto with_pattern = [&](const GgufValue& pattern) {
    GgufWriter w = llama_writer(o);  // 2 layers
    w.add("gemma3.attention.sliding_window", gguf_u32(512));
    w.add("gemma3.attention.sliding_window_pattern", pattern);
    return config_of(w);
  };
  auto period = with_pattern(gguf_u32(2));
  ASSERT_TRUE(period.ok()) << period.status();
  EXPECT_TRUE(period->layer_is_local(0));
  EXPECT_FALSE(period->layer_is_local(1));
  auto same = with_pattern(gguf_array(GgufValueType::kBool, {gguf_bool(true), gguf_bool(true)}));
  ASSERT_TRUE(same.ok()) << same.status();  // 2 layers of a period of 6: both local
  expect_error(with_pattern(gguf_array(GgufValueType::kBool, {gguf_bool(true), gguf_bool(false)})),
               absl::StatusCode::kUnimplemented, "layer 1 global");
  expect_error(with_pattern(gguf_array(GgufValueType::kBool, {gguf_bool(true)})),
               absl::StatusCode::kInvalidArgument, "2 bools");
}

TEST(ConfigTest, SlidingWindowOutsideGemma3IsUnimplemented) {
  for (const char* arch : {"llama", "qwen2"}) {
    Options o;
    o.arch = arch;
    GgufWriter w = llama_writer(o);
    w.add(std::string(arch) + ".attention.sliding_window", gguf_u32(4096));
    expect_error(config_of(w), absl::StatusCode::kUnimplemented, "sliding-window");
  }
}

TEST(ConfigTest, LlamaHasNoLocalLayers) {
  auto c = config_of(llama_writer({}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sliding_window, 0);
  EXPECT_FALSE(c->layer_is_local(0));
  EXPECT_FALSE(c->post_norms || c->gelu_ffn);
  EXPECT_EQ(c->embedding_scale, 1.f);
}

TEST(ConfigTest, OtherArchitectureIsUnimplemented) {
  Options o;
  o.arch = "gpt2";
  expect_error(config_of(llama_writer(o)), absl::StatusCode::kUnimplemented, "'gpt2'");
}

TEST(ConfigTest, MissingArchitectureIsNotFound) {
  expect_error(config_of(GgufWriter()), absl::StatusCode::kNotFound, "general.architecture");
}

TEST(ConfigTest, MissingRequiredKeyIsNotFoundNamingIt) {
  GgufWriter w;
  w.add("general.architecture", gguf_string("llama")).add("llama.block_count", gguf_u32(2));
  expect_error(config_of(w), absl::StatusCode::kNotFound, "llama.embedding_length");
}

TEST(ConfigTest, HeadsNotDivisibleByKvHeads) {
  Options o;
  o.num_heads = 4;
  o.num_kv_heads = 3;
  expect_error(config_of(llama_writer(o)), absl::StatusCode::kInvalidArgument, "llama.attention.head_count_kv (3)");
}

TEST(ConfigTest, HiddenNotDivisibleByHeads) {
  Options o;
  o.hidden = 30;
  o.num_kv_heads = 4;
  expect_error(config_of(llama_writer(o)), absl::StatusCode::kInvalidArgument, "llama.embedding_length (30)");
}

TEST(ConfigTest, NonPositiveOrWrongTypedValues) {
  GgufWriter w;
  w.add("general.architecture", gguf_string("llama")).add("llama.block_count", gguf_i32(0));
  expect_error(config_of(w), absl::StatusCode::kInvalidArgument, "llama.block_count = 0");
  GgufWriter big;
  big.add("general.architecture", gguf_string("llama")).add("llama.block_count", gguf_u64(1ull << 40));
  expect_error(config_of(big), absl::StatusCode::kInvalidArgument, "llama.block_count = 1099511627776");
  GgufWriter str;
  str.add("general.architecture", gguf_string("llama")).add("llama.block_count", gguf_string("30"));
  expect_error(config_of(str), absl::StatusCode::kInvalidArgument, "'llama.block_count' has type string");
  GgufWriter eps = llama_writer({});
  eps.add("llama.rope.freq_base", gguf_f32(-1.f));  // duplicate key is caught first
  expect_error(config_of(eps), absl::StatusCode::kInvalidArgument, "duplicate metadata key");
  Options o;
  o.with_rope_and_eps = false;
  GgufWriter neg = llama_writer(o);
  neg.add("llama.rope.freq_base", gguf_f32(-1.f));
  expect_error(config_of(neg), absl::StatusCode::kInvalidArgument, "llama.rope.freq_base = -1");
}

TEST(ConfigTest, TokenEmbeddingMustExistAndMatchHidden) {
  GgufWriter w;
  w.add("general.architecture", gguf_string("llama"))
      .add("llama.block_count", gguf_u32(2))
      .add("llama.context_length", gguf_u32(128))
      .add("llama.embedding_length", gguf_u32(32))
      .add("llama.feed_forward_length", gguf_u32(64))
      .add("llama.attention.head_count", gguf_u32(4));
  expect_error(config_of(w), absl::StatusCode::kInvalidArgument, "'token_embd.weight' is missing");
  w.add_tensor_f32("token_embd.weight", {16, 2}, std::vector<float>(32, 0.f));
  expect_error(config_of(w), absl::StatusCode::kInvalidArgument, "dims [16, 2], expected [32, vocab_size]");
}

}  // namespace
}  // namespace flashserve::model
