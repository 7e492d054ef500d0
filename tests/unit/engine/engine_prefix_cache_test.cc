// The engine with prefix caching over the fake runner, whose "model" reads every sequence's
// whole context back through its block table: a shared block holding the wrong K/V, or one
// overwritten while shared, changes the output or fails the forward pass.
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/engine_test_util.h"

namespace flashserve::engine {
namespace {

using namespace ::flashserve::engine::fakes;  // NOLINT: fakes and helpers

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Runs `r` to completion alone and returns its tokens.
std::vector<int32_t> run_one(TestEngine& e, GenerationRequest r) {
  auto s = e.submit(std::move(r));
  EXPECT_TRUE(s->wait_final());
  EXPECT_TRUE(s->final_event().status.ok()) << s->final_event().status;
  return s->tokens();
}

double hit_tokens(TestEngine& e) {
  return metric(e.metrics.serialize(), "flashserve_prefix_cache_hit_tokens_total");
}

TEST(EnginePrefixCacheTest, ColdWarmAndPartlyEvictedGiveTheSameTokens) {
  const std::vector<int32_t> system = make_prompt(5, 24);  // 6 blocks of 4
  const std::vector<int32_t> p0 = concat(system, make_prompt(1, 6));
  const std::vector<int32_t> p1 = concat(system, make_prompt(2, 6));
  const std::vector<int32_t> other = make_prompt(9, 40);
  constexpr int kNewTokens = 4;

  TestEngineOptions cold_options{.engine = {}, .num_kv_blocks = 12};
  cold_options.engine.prefix_caching = false;
  TestEngine cold(cold_options);
  cold->start();
  EXPECT_FALSE(cold->snapshot().prefix_caching);
  const std::vector<int32_t> want0 = run_one(cold, greedy_request(p0, kNewTokens));
  const std::vector<int32_t> want1 = run_one(cold, greedy_request(p1, kNewTokens));
  EXPECT_EQ(want0, reference_greedy(*cold.state, p0, kNewTokens));
  EXPECT_EQ(run_one(cold, greedy_request(p0, kNewTokens)), want0);
  EXPECT_EQ(hit_tokens(cold), 0);
  EXPECT_EQ(cold->snapshot().num_kv_blocks_cached, 0);

  TestEngine warm(TestEngineOptions{.engine = {}, .num_kv_blocks = 12});
  warm->start();
  EXPECT_TRUE(warm->snapshot().prefix_caching);
  EXPECT_EQ(run_one(warm, greedy_request(p0, kNewTokens)), want0);  // cold cache
  EXPECT_EQ(hit_tokens(warm), 0);
  // 30 prompt + 3 computed generated tokens: 8 full blocks stay cached.
  EXPECT_EQ(warm->snapshot().num_kv_blocks_cached, 8);
  EXPECT_EQ(warm->snapshot().num_kv_blocks_used, 0);

  const int calls_before = warm.state->calls();
  EXPECT_EQ(run_one(warm, greedy_request(p0, kNewTokens)), want0);  // warm: 7 blocks reused
  EXPECT_EQ(hit_tokens(warm), 28);
  const std::vector<model::ForwardBatch> batches = warm.state->batches_copy();
  EXPECT_EQ(batches[calls_before].num_tokens(), 2);  // prefill of tokens 28 and 29 only
  EXPECT_EQ(batches[calls_before].positions.front(), 28);

  EXPECT_EQ(run_one(warm, greedy_request(p1, kNewTokens)), want1);  // the system prompt only
  EXPECT_EQ(hit_tokens(warm), 28 + 24);

  // 40 unrelated tokens need 10 of the 12 blocks: the 2 never-cached ones plus the 8 least
  // recently released cached ones, which leaves the first two blocks of the system prompt.
  run_one(warm, greedy_request(other, 1));
  EXPECT_EQ(metric(warm.metrics.serialize(), "flashserve_prefix_cache_evictions_total"), 8);
  EXPECT_EQ(run_one(warm, greedy_request(p0, kNewTokens)), want0);  // partly evicted
  EXPECT_EQ(hit_tokens(warm), 28 + 24 + 8);
  EXPECT_EQ(warm->snapshot().num_kv_blocks_used, 0);
  const std::string text = warm.metrics.serialize();
  EXPECT_EQ(metric(text, "flashserve_prefix_cache_queried_tokens_total"), 30 * 4 + 40);
  EXPECT_EQ(metric(text, "flashserve_prefix_cache_blocks"),
            warm->snapshot().num_kv_blocks_cached);
}

// Many requests over a few shared prefixes, a fifth of them cancelled at a random point:
// every request ends exactly once, finished ones match the model, and every block comes back.
TEST(EnginePrefixCacheTest, TenThousandRequestsWithCancellationsLeakNoBlock) {
  constexpr int kNumRequests = 10000;
  constexpr int kWave = 200;
  TestEngineOptions options{.engine = {}, .num_kv_blocks = 40, .block_size = 4};
  options.engine.max_num_seqs = 16;
  options.engine.max_batch_tokens = 48;
  options.engine.max_waiting = kWave;
  TestEngine e(options);
  e->start();
  std::vector<std::vector<int32_t>> systems;
  for (int i = 0; i < 5; ++i) systems.push_back(make_prompt(10 + i, 8 + 4 * i));
  std::mt19937 rng(2026);
  int num_finished = 0, num_cancelled = 0;
  for (int wave = 0; wave < kNumRequests / kWave; ++wave) {
    struct Sent {
      std::vector<int32_t> prompt;
      int max_new_tokens;
      std::shared_ptr<Stream> stream;
    };
    std::vector<Sent> sent;
    for (int i = 0; i < kWave; ++i) {
      Sent s{concat(systems[rng() % systems.size()],
                    make_prompt(static_cast<int>(rng() % 1000), 1 + rng() % 9)),
             1 + static_cast<int>(rng() % 6), Stream::make()};
      const int cancel_mode = static_cast<int>(rng() % 10);  // 0: at once, 1: at 1st event
      auto id = std::make_shared<std::atomic<RequestId>>(0);
      Engine* engine = e.get();
      EventSink sink = cancel_mode == 1 ? s.stream->sink([engine, id](const GenerationEvent&) {
        engine->cancel(id->load());
      })
                                        : s.stream->sink();
      absl::StatusOr<RequestId> got =
          e->submit(greedy_request(s.prompt, s.max_new_tokens), std::move(sink));
      ASSERT_TRUE(got.ok()) << got.status();
      id->store(*got);
      if (cancel_mode == 0) e->cancel(*got);
      sent.push_back(std::move(s));
    }
    for (Sent& s : sent) {
      ASSERT_TRUE(s.stream->wait_final());
      ASSERT_EQ(s.stream->num_final(), 1);
      ASSERT_FALSE(s.stream->event_after_final());
      const GenerationEvent fin = s.stream->final_event();
      ASSERT_TRUE(fin.status.ok()) << fin.status;
      const std::vector<int32_t> want = reference_greedy(*e.state, s.prompt, s.max_new_tokens);
      const std::vector<int32_t> got = s.stream->tokens();
      if (fin.finish_reason == FinishReason::kCancelled) {
        ++num_cancelled;
        ASSERT_LE(got.size(), want.size());
        ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
      } else {
        ++num_finished;
        ASSERT_EQ(got, want);
      }
    }
  }
  const EngineSnapshot snap = e->snapshot();
  EXPECT_EQ(snap.num_kv_blocks_used, 0);
  EXPECT_LE(snap.num_kv_blocks_cached, snap.num_kv_blocks_total);
  EXPECT_GT(num_cancelled, kNumRequests / 20);
  EXPECT_GT(num_finished, kNumRequests / 2);
  const std::string text = e.metrics.serialize();
  EXPECT_GT(metric(text, "flashserve_prefix_cache_hit_tokens_total"), 0);
  EXPECT_GT(metric(text, "flashserve_prefix_cache_evictions_total"), 0);
}

TEST(EnginePrefixCacheTest, CapacityErrorsWithTheCacheFullOfSharedBlocks) {
  TestEngine e(TestEngineOptions{.engine = {}, .num_kv_blocks = 8, .block_size = 4});
  e->start();
  const std::vector<int32_t> system = make_prompt(3, 16);  // 4 blocks
  // Two long requests share the system prompt and hold it while a third waits for room.
  GenerationRequest a = greedy_request(concat(system, make_prompt(4, 3)), 8);
  GenerationRequest b = greedy_request(concat(system, make_prompt(5, 3)), 8);
  auto sa = e.submit(a);
  ASSERT_TRUE(sa->wait_final());
  auto sb = e.submit(b);
  auto sc = e.submit(greedy_request(make_prompt(6, 28), 4));  // needs 8 blocks: waits
  for (auto* s : {&sb, &sc}) ASSERT_TRUE((*s)->wait_final());
  EXPECT_EQ(sb->tokens(), reference_greedy(*e.state, b.prompt_tokens, 8));
  EXPECT_EQ(sc->tokens(), reference_greedy(*e.state, make_prompt(6, 28), 4));
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
  EXPECT_EQ(e->snapshot().num_kv_blocks_cached, 7);  // c's 7 full blocks evicted the rest

  // Beyond the whole cache is refused at once, cached blocks or not.
  auto refused = Stream::make();
  absl::StatusOr<RequestId> r =
      e->submit(greedy_request(make_prompt(7, 30), 4), refused->sink());  // 33 tokens: 9
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("needs 9 KV blocks"), std::string::npos) << r.status();
  // Exactly the whole cache is fine: every cached block is evicted for it.
  EXPECT_EQ(run_one(e, greedy_request(make_prompt(8, 29), 4)),
            reference_greedy(*e.state, make_prompt(8, 29), 4));
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
}

}  // namespace
}  // namespace flashserve::engine
