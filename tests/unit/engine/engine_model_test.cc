// The engine over the real CPU runner and tokenizer (SmolLM2-135M; skipped when models/ lacks
// it): batching, chunked prefill and preemption by recompute must not change greedy output.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/model_loader.h"
#include "tests/support/engine_test_util.h"

namespace flashserve::engine {
namespace {

using fakes::Stream;
using fakes::metric;

constexpr char kModelPath[] = FLASHSERVE_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

// Two short prompts and two that cross the 64-token block boundary while generating.
const char* const kPrompts[] = {
    "The capital of France is",
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. "
    "The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog. "
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "def fibonacci(n):",
    "Once upon a time, in a small village by the sea, there lived an old fisherman who went "
    "out every morning before sunrise. One day, as the waves rose higher than ever before, he "
    "saw something shining in the water and",
};
constexpr int kNumPrompts = sizeof(kPrompts) / sizeof(kPrompts[0]);
constexpr int kMaxNewTokens = 16;

class EngineModelTest : public ::testing::Test {
 protected:
  // An engine over a fresh runner with `num_kv_blocks` blocks of 64 tokens.
  std::unique_ptr<Engine> make_engine(EngineOptions options, int num_kv_blocks) {
    if (!std::filesystem::exists(kModelPath)) return nullptr;
    model::LoadOptions load;
    load.num_kv_blocks = num_kv_blocks;
    load.num_threads = 1;  // the machine is shared; one BLAS thread per engine is plenty
    absl::StatusOr<model::LoadedModel> loaded = model::load_model(kModelPath, load);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (!loaded.ok()) return nullptr;
    models_.push_back(std::move(*loaded));
    return std::make_unique<Engine>(std::move(models_.back().runner),
                                    *models_.back().tokenizer, options, &metrics_);
  }

  GenerationRequest request(int i) {
    GenerationRequest r;
    r.prompt_tokens = models_.front().tokenizer->encode(kPrompts[i], true, false);
    RecordProperty("prompt_tokens_" + std::to_string(i), static_cast<int>(r.prompt_tokens.size()));
    r.max_new_tokens = kMaxNewTokens;
    r.ignore_eos = true;  // compare full-length outputs
    return r;
  }

  metrics::Metrics metrics_;  // outlives the engines
  std::vector<model::LoadedModel> models_;
};

TEST_F(EngineModelTest, GreedyOutputIsTheSameAloneAndBatched) {
  std::unique_ptr<Engine> solo = make_engine({.max_num_seqs = 1}, 4);
  if (solo == nullptr) GTEST_SKIP() << kModelPath << " is absent (scripts/fetch-model.sh)";
  solo->start();
  std::vector<std::vector<int32_t>> alone(kNumPrompts);
  for (int i = 0; i < kNumPrompts; ++i) {
    auto s = Stream::make();
    ASSERT_TRUE(solo->submit(request(i), s->sink()).ok());
    ASSERT_TRUE(s->wait_final(absl::Seconds(120)));
    ASSERT_EQ(s->final_event().finish_reason, FinishReason::kLength) << s->final_event().status;
    alone[i] = s->tokens();
  }
  solo.reset();

  // All at once, prefill chunked under 32 tokens per step, and 3 blocks of 64 tokens for
  // requests that need 1 + 2 + 1 + 2 blocks: sequences are preempted and recomputed.
  const std::string before = metrics_.serialize();
  std::unique_ptr<Engine> batched = make_engine({.max_num_seqs = 8, .max_batch_tokens = 32}, 3);
  ASSERT_NE(batched, nullptr);
  std::vector<std::shared_ptr<Stream>> streams;
  for (int i = 0; i < kNumPrompts; ++i) {
    streams.push_back(Stream::make());
    ASSERT_TRUE(batched->submit(request(i), streams.back()->sink()).ok());
  }
  batched->start();
  for (int i = 0; i < kNumPrompts; ++i) {
    ASSERT_TRUE(streams[i]->wait_final(absl::Seconds(300)));
    EXPECT_EQ(streams[i]->final_event().finish_reason, FinishReason::kLength)
        << streams[i]->final_event().status;
    EXPECT_EQ(streams[i]->tokens(), alone[i]) << "prompt " << i << ": " << kPrompts[i];
  }
  EXPECT_EQ(batched->snapshot().num_kv_blocks_used, 0);
  EXPECT_NE(before.find("flashserve_engine_preemptions_total 0\n"), std::string::npos);
  EXPECT_EQ(metrics_.serialize().find("flashserve_engine_preemptions_total 0\n"),
            std::string::npos)
      << "no preemption happened";
}

// A long shared prefix (several 64-token blocks) then a per-request question.
TEST_F(EngineModelTest, PrefixCacheColdWarmAndPartlyEvictedGiveTheSameTokens) {
  std::unique_ptr<Engine> cold = make_engine({.prefix_caching = false}, 5);
  if (cold == nullptr) GTEST_SKIP() << kModelPath << " is absent (scripts/fetch-model.sh)";
  const model::Tokenizer& tok = *models_.front().tokenizer;
  const std::string system = std::string(kPrompts[3]) + " " + kPrompts[1] + " " + kPrompts[3] +
                             " " + kPrompts[1];
  const auto make = [&](const std::string& text) {
    GenerationRequest r;
    r.prompt_tokens = tok.encode(text, true, false);
    r.max_new_tokens = kMaxNewTokens;
    r.ignore_eos = true;
    return r;
  };
  const GenerationRequest a = make(system + " Where did the fisherman live?");
  const GenerationRequest other =
      make(std::string(kPrompts[1]) + " " + kPrompts[1] + " " + kPrompts[1]);
  ASSERT_GE(a.prompt_tokens.size(), 3u * 64 + 1);  // 3 cacheable blocks at least
  // With a in the cache, `other` needs 3 or 4 of the 5 blocks: it evicts part of a's chain.
  const size_t other_tokens = other.prompt_tokens.size() + kMaxNewTokens - 1;
  ASSERT_GT(other_tokens, 2u * 64);
  ASSERT_LE(other_tokens, 4u * 64);
  RecordProperty("shared_prompt_tokens", static_cast<int>(a.prompt_tokens.size()));
  const auto run = [](Engine& engine, const GenerationRequest& r) {
    auto s = Stream::make();
    EXPECT_TRUE(engine.submit(r, s->sink()).ok());
    EXPECT_TRUE(s->wait_final(absl::Seconds(300)));
    EXPECT_EQ(s->final_event().finish_reason, FinishReason::kLength) << s->final_event().status;
    return s->tokens();
  };
  cold->start();
  const std::vector<int32_t> want = run(*cold, a);
  cold.reset();

  std::unique_ptr<Engine> warm = make_engine({}, 5);
  ASSERT_NE(warm, nullptr);
  warm->start();
  const std::string hits = "flashserve_prefix_cache_hit_tokens_total";
  const double hits_before = metric(metrics_.serialize(), hits);
  EXPECT_EQ(run(*warm, a), want) << "cold cache";
  EXPECT_EQ(metric(metrics_.serialize(), hits), hits_before);
  const int num_full = (static_cast<int>(a.prompt_tokens.size()) - 1) / 64;
  EXPECT_EQ(run(*warm, a), want) << "warm cache";
  EXPECT_EQ(metric(metrics_.serialize(), hits), hits_before + num_full * 64);
  run(*warm, other);  // needs blocks: evicts the tail of a's cached chain
  const double hits_partial = metric(metrics_.serialize(), hits);
  EXPECT_EQ(run(*warm, a), want) << "partly evicted cache";
  const double reused = metric(metrics_.serialize(), hits) - hits_partial;
  EXPECT_GT(reused, 0);
  EXPECT_LT(reused, num_full * 64);
  EXPECT_EQ(warm->snapshot().num_kv_blocks_used, 0);
}

}  // namespace
}  // namespace flashserve::engine
