// load_model (model/model_loader.h): the one call the server makes. Runs on the real default
// model (skipped without it) for the happy path; error paths need no model.
#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/cpu/llama_forward.h"
#include "model/model_loader.h"
#include "model/step_budget.h"
#include "model/weights.h"
#include "tests/support/forward_test_util.h"

namespace flashserve::model {
namespace {

constexpr char kModelPath[] = FLASHSERVE_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(LoadModelTest, MissingFileIsAnError) {
  auto loaded = load_model(FLASHSERVE_SOURCE_DIR "/models/no-such-model.gguf", LoadOptions{});
  EXPECT_FALSE(loaded.ok());
}

class LoadDefaultModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModelPath)) GTEST_SKIP() << kModelPath << " is absent";
  }
};

TEST_F(LoadDefaultModelTest, LoadsEverythingTheServerNeeds) {
  LoadOptions options;
  options.kv_cache_mb = 64;
  options.num_threads = 1;
  auto loaded = load_model(kModelPath, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const LoadedModel& m = *loaded;
  ASSERT_NE(m.file, nullptr);
  ASSERT_NE(m.tokenizer, nullptr);
  ASSERT_NE(m.runner, nullptr);
  EXPECT_EQ(m.config.architecture, "llama");
  EXPECT_EQ(m.config.vocab_size, m.tokenizer->vocab_size());
  ASSERT_TRUE(m.chat_template.has_value());  // SmolLM2 ships a ChatML template
  EXPECT_EQ(m.chat_template->family_name(), "chatml");
  // 64 MiB of fp32 K and V over 30 layers, 3 KV heads, 64-token blocks of head_dim 64.
  const int64_t per_block = PagedKvCache::bytes_per_block(
      m.config.num_layers, m.config.num_kv_heads, m.runner->kv_block_size(), m.config.head_dim);
  EXPECT_EQ(per_block, 2 * 30 * 3 * 64 * 64 * 4);
  EXPECT_EQ(m.runner->num_kv_blocks(), (int64_t{64} << 20) / per_block);
  // max_batch_tokens 0: the CPU backend's default budget, which the engine is then given.
  EXPECT_EQ(m.max_batch_tokens, kDefaultStepTokens);

  // One decode-sized forward works through the ModelRunner interface.
  ForwardBatch batch;
  batch.token_ids = {504, 3575};
  batch.positions = {0, 1};
  batch.cu_seqlens_q = {0, 2};
  batch.seqlens_k = {2};
  batch.block_tables = {3};
  batch.max_blocks_per_seq = 1;
  batch.slot_mapping = {3 * 64, 3 * 64 + 1};
  std::vector<float> logits;
  ASSERT_TRUE(testing::logits_runner(m.runner.get())
                  ->forward_logits(batch, m.config.num_layers, &logits)
                  .ok());
  EXPECT_EQ(logits.size(), static_cast<size_t>(m.config.vocab_size));
}

// A backend that uploads a matrix from the file's blocks skips its fp32 copy: the skipped
// tensors' members stay empty, every other one is read as without a skip.
TEST_F(LoadDefaultModelTest, LayerTensorsTheCallerSkipsAreNotRead) {
  auto file = GgufFile::open(kModelPath);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = config_from_gguf(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  LayerWeights all_weights, some_weights;
  LayerWeights* all = &all_weights;
  LayerWeights* some = &some_weights;
  ASSERT_TRUE(load_llama_layer(**file, *config, 1, {}, all).ok());
  std::vector<std::string> asked;
  ASSERT_TRUE(load_llama_layer(**file, *config, 1,
                               [&](std::string_view name) {
                                 asked.emplace_back(name);
                                 return name == "blk.1.attn_k.weight" ||
                                        name == "blk.1.ffn_down.weight";
                               },
                               some)
                  .ok());
  EXPECT_TRUE(some->wk.empty());
  EXPECT_TRUE(some->w_down.empty());
  EXPECT_EQ(some->wq, all->wq);
  EXPECT_EQ(some->wv, all->wv);
  EXPECT_EQ(some->w_up, all->w_up);
  EXPECT_EQ(some->attn_norm, all->attn_norm);
  EXPECT_FALSE(all->wk.empty());
  // Every tensor of the layer is asked about by its full name, once.
  EXPECT_EQ(asked.size(), 9u);
  EXPECT_NE(std::find(asked.begin(), asked.end(), "blk.1.ffn_norm.weight"), asked.end());
}

// The CUDA loader reads every layer into one LayerWeights (load_llama_layer): each layer
// read that way equals a fresh read, a tensor skipped in one layer is empty there and read
// again in the next, and the members' memory is kept from layer to layer.
TEST_F(LoadDefaultModelTest, ALayerReadIntoReusedWeightsEqualsAFreshRead) {
  auto file = GgufFile::open(kModelPath);
  ASSERT_TRUE(file.ok()) << file.status();
  auto config = config_from_gguf(**file);
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_GE(config->num_layers, 3);
  LayerWeights reused;
  const float* wq_memory = nullptr;
  for (int layer = 0; layer < 3; ++layer) {
    const std::string down = absl::StrCat("blk.", layer, ".ffn_down.weight");
    const bool skip_down = layer == 1;
    ASSERT_TRUE(load_llama_layer(**file, *config, layer,
                                      [&](std::string_view name) {
                                        return skip_down && name == down;
                                      },
                                      &reused)
                    .ok());
    LayerWeights fresh_weights;
    LayerWeights* fresh = &fresh_weights;
    ASSERT_TRUE(load_llama_layer(**file, *config, layer, {}, fresh).ok());
    EXPECT_EQ(reused.wq, fresh->wq) << layer;
    EXPECT_EQ(reused.wk, fresh->wk) << layer;
    EXPECT_EQ(reused.wv, fresh->wv) << layer;
    EXPECT_EQ(reused.wo, fresh->wo) << layer;
    EXPECT_EQ(reused.w_gate, fresh->w_gate) << layer;
    EXPECT_EQ(reused.w_up, fresh->w_up) << layer;
    EXPECT_EQ(reused.attn_norm, fresh->attn_norm) << layer;
    EXPECT_EQ(reused.ffn_norm, fresh->ffn_norm) << layer;
    if (skip_down) {
      EXPECT_TRUE(reused.w_down.empty());
    } else {
      EXPECT_EQ(reused.w_down, fresh->w_down) << layer;
    }
    if (layer == 0) wq_memory = reused.wq.data();
    EXPECT_EQ(reused.wq.data(), wq_memory) << layer;
  }
}

TEST_F(LoadDefaultModelTest, ExplicitBlockCountAndCapacityChecks) {
  LoadOptions options;
  options.num_kv_blocks = 5;
  options.max_num_seqs = 6;  // one block per sequence cannot fit
  auto loaded = load_model(kModelPath, options);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kResourceExhausted);

  options.max_num_seqs = 5;
  loaded = load_model(kModelPath, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded).runner->num_kv_blocks(), 5);
  EXPECT_EQ((*loaded).max_batch_tokens, kDefaultStepTokens);

  options.max_batch_tokens = 96;  // an explicit budget is the one reported
  loaded = load_model(kModelPath, options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded).max_batch_tokens, 96);

  options.num_threads = -1;
  EXPECT_EQ(load_model(kModelPath, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashserve::model
