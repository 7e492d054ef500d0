// Continuous batching through the engine: admission order, per-step budgets in the batches
// the runner sees, chunked prefill, preemption by recompute, no block leaks, batch-invariant
// outputs, and the metrics after a known workload.
#include <map>
#include <optional>
#include <random>

#include "gtest/gtest.h"
#include "tests/support/engine_test_util.h"

namespace flashserve::engine {
namespace {

using namespace ::flashserve::engine::fakes;  // NOLINT: fakes and helpers

// The index (into `prompts`) of the request whose prefill starts at sequence s of `b`, or -1
// (a decode or a later chunk).
int prefill_start_of(const model::ForwardBatch& b, int s,
                     const std::vector<std::vector<int32_t>>& prompts) {
  const int first = b.cu_seqlens_q[s];
  if (b.positions[first] != 0) return -1;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int n = std::min<int>(b.cu_seqlens_q[s + 1] - first, prompts[i].size());
    if (std::equal(prompts[i].begin(), prompts[i].begin() + n, b.token_ids.begin() + first)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

TEST(EngineBatchingTest, AdmitsInSubmissionOrder) {
  TestEngine e({.engine = {.max_num_seqs = 2}});
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<Stream>> streams;
  const int max_new[] = {2, 6, 3, 3, 3};
  for (int i = 0; i < 5; ++i) {
    prompts.push_back(make_prompt(i, 4));
    streams.push_back(e.submit(greedy_request(prompts.back(), max_new[i])));
  }
  e->start();
  for (auto& s : streams) ASSERT_TRUE(s->wait_final());
  std::vector<int> admitted;
  std::vector<int> admitted_at_step(5, -1);
  const auto batches = e.state->batches_copy();
  for (size_t k = 0; k < batches.size(); ++k) {
    EXPECT_LE(batches[k].num_seqs(), 2);
    for (int s = 0; s < batches[k].num_seqs(); ++s) {
      const int i = prefill_start_of(batches[k], s, prompts);
      if (i >= 0) {
        admitted.push_back(i);
        admitted_at_step[i] = static_cast<int>(k);
      }
    }
  }
  EXPECT_EQ(admitted, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(admitted_at_step[0], 0);
  EXPECT_EQ(admitted_at_step[1], 0);
  // Request 0 finishes after 2 steps; request 2 takes its place in the very next step.
  EXPECT_EQ(admitted_at_step[2], 2);
}

TEST(EngineBatchingTest, ChunkedPrefillBatchesAreLaidOutOverThePagedCache) {
  TestEngine e({.engine = {.max_batch_tokens = 16}, .num_kv_blocks = 64, .block_size = 4});
  const std::vector<int32_t> prompt = make_prompt(1, 40);
  auto s = e.submit(greedy_request(prompt, 3));
  e->start();
  ASSERT_TRUE(s->wait_final());
  EXPECT_EQ(s->tokens(), reference_greedy(*e.state, prompt, 3));  // only the last chunk sampled
  const auto batches = e.state->batches_copy();
  ASSERT_EQ(batches.size(), 5u);  // chunks of 16, 16, 8, then two decodes
  const int expected_first[] = {0, 16, 32, 40, 41};
  const int expected_len[] = {16, 16, 8, 1, 1};
  for (size_t k = 0; k < batches.size(); ++k) {
    const model::ForwardBatch& b = batches[k];
    ASSERT_EQ(b.num_seqs(), 1);
    ASSERT_EQ(b.num_tokens(), expected_len[k]) << "step " << k;
    EXPECT_EQ(b.seqlens_k[0], expected_first[k] + expected_len[k]);
    EXPECT_EQ(b.max_blocks_per_seq, (b.seqlens_k[0] + 3) / 4);
    for (int t = 0; t < b.num_tokens(); ++t) {
      const int pos = expected_first[k] + t;
      EXPECT_EQ(b.positions[t], pos);
      EXPECT_EQ(b.slot_mapping[t], b.block_tables[pos / 4] * 4 + pos % 4);
      if (pos < 40) {
        EXPECT_EQ(b.token_ids[t], prompt[pos]);
      }
    }
    if (k > 0) {  // block tables only grow; earlier blocks stay where they were
      const auto& prev = batches[k - 1].block_tables;
      EXPECT_TRUE(std::equal(prev.begin(), prev.end(), b.block_tables.begin()));
    }
  }
}

// Many requests with random sizes, a small budget and a small cache: every batch respects
// both budgets, every output equals the model's greedy output, and all blocks come back.
TEST(EngineBatchingTest, RandomWorkloadKeepsBudgetsAndReturnsEveryBlock) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    TestEngine e({.engine = {.max_num_seqs = 4, .max_batch_tokens = 16},
                  .num_kv_blocks = 24,
                  .block_size = 4});
    e->start();
    std::vector<std::vector<int32_t>> prompts;
    std::vector<int> max_new;
    std::vector<std::shared_ptr<Stream>> streams;
    std::vector<RequestId> ids;
    for (int i = 0; i < 30; ++i) {
      prompts.push_back(make_prompt(i + 100 * seed, 1 + rng() % 40));
      max_new.push_back(1 + rng() % 12);
      RequestId id = 0;
      streams.push_back(e.submit(greedy_request(prompts.back(), max_new.back()), &id));
      ids.push_back(id);
      if (rng() % 6 == 0) e->cancel(ids[rng() % ids.size()]);
    }
    int num_cancelled = 0;
    for (size_t i = 0; i < streams.size(); ++i) {
      ASSERT_TRUE(streams[i]->wait_final());
      EXPECT_EQ(streams[i]->num_final(), 1);
      const GenerationEvent fin = streams[i]->final_event();
      if (fin.finish_reason == FinishReason::kCancelled) {
        ++num_cancelled;
        continue;
      }
      EXPECT_EQ(fin.finish_reason, FinishReason::kLength);
      EXPECT_EQ(streams[i]->tokens(), reference_greedy(*e.state, prompts[i], max_new[i]))
          << "seed " << seed << " request " << i;
    }
    for (const auto& b : e.state->batches_copy()) {
      EXPECT_LE(b.num_tokens(), 16);
      EXPECT_LE(b.num_seqs(), 4);
    }
    const EngineSnapshot snap = e->snapshot();
    EXPECT_EQ(snap.num_kv_blocks_used, 0);
    EXPECT_EQ(snap.num_running, 0);
    EXPECT_EQ(snap.num_waiting, 0);
    RecordProperty("cancelled_seed_" + std::to_string(seed), num_cancelled);
  }
}

TEST(EngineBatchingTest, PreemptedRequestsResumeWithTheSameTokens) {
  // 6 blocks of 4 tokens; each request ends with 10 + 11 = 21 cached tokens (6 blocks), so
  // four at once must preempt each other.
  TestEngine e({.engine = {.max_num_seqs = 4}, .num_kv_blocks = 6, .block_size = 4});
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<Stream>> streams;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(make_prompt(i, 10));
    streams.push_back(e.submit(greedy_request(prompts.back(), 12)));
  }
  e->start();
  for (size_t i = 0; i < streams.size(); ++i) {
    ASSERT_TRUE(streams[i]->wait_final());
    EXPECT_EQ(streams[i]->final_event().finish_reason, FinishReason::kLength);
    EXPECT_EQ(streams[i]->tokens(), reference_greedy(*e.state, prompts[i], 12)) << i;
    EXPECT_EQ(streams[i]->text(), e.tokenizer.decode(streams[i]->tokens(), true));
  }
  const std::string text = e.metrics.serialize();
  EXPECT_EQ(text.find("flashserve_engine_preemptions_total 0\n"), std::string::npos)
      << "the workload never preempted";
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
}

// Greedy and seeded outputs are the same alone and among 16 concurrent requests (with
// chunked prefill and a tight cache forcing preemption).
TEST(EngineBatchingTest, OutputsAreTheSameAloneAndAmongSixteen) {
  constexpr int kNumRequests = 16;
  auto make_request = [](int i) {
    GenerationRequest r = greedy_request(make_prompt(i, 3 + (i * 5) % 23), 4 + i % 9);
    if (i % 2 == 1) {  // seeded sampling must be batch-invariant too
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 1000 + i;
      r.sampling.has_seed = true;
    }
    if (i % 5 == 0) r.stop_strings = {"q"};
    return r;
  };
  std::vector<std::vector<int32_t>> alone_tokens(kNumRequests);
  std::vector<std::string> alone_text(kNumRequests);
  for (int i = 0; i < kNumRequests; ++i) {
    TestEngine solo;
    solo->start();
    auto s = solo.submit(make_request(i));
    ASSERT_TRUE(s->wait_final());
    alone_tokens[i] = s->tokens();
    alone_text[i] = s->text();
  }
  // Roomy: all sixteen in every step. Tight: chunked prefill under a small token budget and
  // a cache too small for all of them, so sequences are preempted and recomputed.
  const TestEngineOptions roomy{.engine = {.max_num_seqs = 16, .max_batch_tokens = 512},
                                .num_kv_blocks = 256, .block_size = 4};
  const TestEngineOptions tight{.engine = {.max_num_seqs = 16, .max_batch_tokens = 24},
                                .num_kv_blocks = 40, .block_size = 4};
  for (const TestEngineOptions& options : {roomy, tight}) {
    const bool is_tight = options.num_kv_blocks == tight.num_kv_blocks;
    TestEngine e(options);
    std::vector<std::shared_ptr<Stream>> streams;
    for (int i = 0; i < kNumRequests; ++i) streams.push_back(e.submit(make_request(i)));
    e->start();
    for (int i = 0; i < kNumRequests; ++i) {
      ASSERT_TRUE(streams[i]->wait_final());
      EXPECT_EQ(streams[i]->tokens(), alone_tokens[i]) << "request " << i << " tight " << is_tight;
      EXPECT_EQ(streams[i]->text(), alone_text[i]) << "request " << i << " tight " << is_tight;
    }
    int max_seqs = 0;
    for (const auto& b : e.state->batches_copy()) max_seqs = std::max(max_seqs, b.num_seqs());
    const bool preempted =
        e.metrics.serialize().find("flashserve_engine_preemptions_total 0\n") ==
        std::string::npos;
    if (is_tight) {
      EXPECT_GE(max_seqs, 4) << "the requests were never batched together";
      EXPECT_TRUE(preempted) << "the tight cache never forced a preemption";
    } else {
      EXPECT_EQ(max_seqs, kNumRequests);
      EXPECT_FALSE(preempted);
    }
  }
}

TEST(EngineBatchingTest, MetricsAfterAKnownWorkload) {
  TestEngine e({.engine = {.max_num_seqs = 8, .max_waiting = 3}, .num_kv_blocks = 50});
  std::vector<std::shared_ptr<Stream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(e.submit(greedy_request(make_prompt(i, 5), 4)));
  // Refused: the queue holds 3.
  EXPECT_FALSE(e->submit(greedy_request(make_prompt(9, 5), 4), Stream::make()->sink()).ok());
  e->start();
  for (auto& s : streams) ASSERT_TRUE(s->wait_final());
  RequestId id = 0;
  auto cancelled = e.submit(greedy_request(make_prompt(7, 6), 4), &id);
  // The engine is running: the cancel lands before or after some of its steps; either way the
  // request is counted once, as cancelled (or as length if it finished first).
  e->cancel(id);
  ASSERT_TRUE(cancelled->wait_final());
  const bool was_cancelled = cancelled->final_event().finish_reason == FinishReason::kCancelled;
  const int extra_generated = cancelled->final_event().usage.completion_tokens;

  const std::string t = e.metrics.serialize();
  EXPECT_EQ(metric(t, "flashserve_requests_total{api=\"grpc\",status=\"length\"}"), was_cancelled ? 3 : 4);
  EXPECT_EQ(metric(t, "flashserve_requests_total{api=\"grpc\",status=\"cancelled\"}"), was_cancelled ? 1 : 0);
  EXPECT_EQ(metric(t, "flashserve_requests_total{api=\"grpc\",status=\"capacity\"}"), 1);
  EXPECT_EQ(metric(t, "flashserve_prompt_tokens_total"), 3 * 5 + 6);
  EXPECT_EQ(metric(t, "flashserve_generated_tokens_total"), 3 * 4 + extra_generated);
  EXPECT_EQ(metric(t, "flashserve_request_duration_seconds_count"), 4);
  // The first three: one prefill step for all, then three decode steps.
  const int steps = e.state->calls();
  EXPECT_EQ(metric(t, "flashserve_engine_steps_total"), steps);
  EXPECT_EQ(metric(t, "flashserve_batch_sequences_count"), steps);
  EXPECT_EQ(metric(t, "flashserve_time_to_first_token_seconds_count"),
            3 + (extra_generated > 0 ? 1 : 0));
  EXPECT_EQ(metric(t, "flashserve_inter_token_latency_seconds_count"),
            3 * 3 + std::max(0, extra_generated - 1));
  EXPECT_EQ(metric(t, "flashserve_requests_running"), 0);
  EXPECT_EQ(metric(t, "flashserve_requests_waiting"), 0);
  EXPECT_EQ(metric(t, "flashserve_kv_cache_blocks_used"), 0);
  EXPECT_EQ(metric(t, "flashserve_kv_cache_blocks_capacity"), 50);
  // Attention metrics are exactly what the runner reported.
  model::AttentionPhaseStats prefill, decode;
  {
    std::lock_guard<std::mutex> lock(e.state->mu);
    prefill = e.state->total_stats.prefill;
    decode = e.state->total_stats.decode;
  }
  EXPECT_EQ(metric(t, "flashserve_attention_kernel_bytes_total{phase=\"prefill\"}"),
            prefill.bytes);
  EXPECT_EQ(metric(t, "flashserve_attention_kernel_bytes_total{phase=\"decode\"}"),
            decode.bytes);
  EXPECT_EQ(metric(t, "flashserve_attention_kernel_flops_total{phase=\"prefill\"}"),
            prefill.flops);
  EXPECT_EQ(metric(t, "flashserve_attention_kernel_seconds_count{phase=\"prefill\"}"),
            prefill.calls);
  EXPECT_EQ(metric(t, "flashserve_attention_kernel_seconds_count{phase=\"decode\"}"),
            decode.calls);
  EXPECT_DOUBLE_EQ(metric(t, "flashserve_attention_kernel_seconds_sum{phase=\"decode\"}"),
                   decode.seconds);
  EXPECT_GT(metric(t, "flashserve_attention_kernel_bandwidth_bytes_per_second{phase=\"decode\"}"),
            0);
}

// A server with metrics off (--metrics-port -1) gives the engine no metrics: the runner is then
// asked for no stats (the CUDA runner skips its timing events), and the output is the same.
TEST(EngineBatchingTest, WithoutMetricsTheRunnerIsAskedForNoStats) {
  std::vector<std::vector<int32_t>> outputs;
  for (const bool with_metrics : {true, false}) {
    TestEngine e({.engine = {.max_num_seqs = 4}, .with_metrics = with_metrics});
    e->start();
    std::vector<std::shared_ptr<Stream>> streams;
    for (int i = 0; i < 3; ++i) streams.push_back(e.submit(greedy_request(make_prompt(i, 7), 6)));
    std::vector<int32_t> tokens;
    for (auto& s : streams) {
      ASSERT_TRUE(s->wait_final());
      const std::vector<int32_t> t = s->tokens();
      tokens.insert(tokens.end(), t.begin(), t.end());
    }
    ASSERT_GT(e.state->calls(), 0);
    EXPECT_EQ(e.state->calls_with_stats(), with_metrics ? e.state->calls() : 0);
    const std::string t = e.metrics.serialize();
    EXPECT_EQ(metric(t, "flashserve_generated_tokens_total"), with_metrics ? 18 : 0);
    outputs.push_back(std::move(tokens));
  }
  EXPECT_EQ(outputs[0], outputs[1]);
  EXPECT_EQ(outputs[0].size(), 18u);
}

}  // namespace
}  // namespace flashserve::engine
