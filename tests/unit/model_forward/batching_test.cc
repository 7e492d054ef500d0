// The same work batched, chunked or paged differently must give the same logits: the
// engine relies on it (a request's output does not depend on its neighbours in a step).
// These tests reuse the fixture of forward_test.cc through model_forward_fixture.h.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <vector>

#include "model_forward_fixture.h"

namespace flashserve::model {
namespace {

using testing::max_abs_diff;
using testing::relative_error;

// The prompt of golden case `c` followed by its greedy continuation (~40-50 tokens).
TEST_P(BatchingTest, ChunkedPrefillAndTokenByTokenMatchOneShot) {
  const std::vector<int32_t> tokens = case_tokens(1);
  TestSequence one_shot = new_sequence(tokens.size());
  const std::vector<float> expected = feed(runner(), &one_shot, tokens);

  TestSequence chunked = new_sequence(tokens.size());
  const size_t split = 17;
  feed(runner(), &chunked, std::span(tokens).first(split));
  const std::vector<float> two_chunks = feed(runner(), &chunked, std::span(tokens).subspan(split));

  TestSequence stepped = new_sequence(tokens.size());
  std::vector<float> token_by_token;
  for (size_t i = 0; i < tokens.size(); ++i) {
    token_by_token = feed(runner(), &stepped, std::span(tokens).subspan(i, 1));
  }
  check("two chunks", two_chunks, expected);
  check("token by token", token_by_token, expected);
}

// Four sequences over three steps, mixing prefills and decodes in one batch, against each
// sequence run alone with the same chunks.
TEST_P(BatchingTest, BatchedSequencesMatchEachAlone) {
  // steps[s][k]: the tokens sequence s feeds at step k (empty: not in that step's batch).
  std::vector<std::vector<std::vector<int32_t>>> steps(4);
  for (int s = 0; s < 4; ++s) {
    const std::vector<int32_t> all = case_tokens(s);
    const size_t prompt = 5 + 7 * s;  // different lengths per sequence
    steps[s].push_back(std::vector<int32_t>(all.begin(), all.begin() + prompt));
    steps[s].push_back({all[prompt]});
    steps[s].push_back({all[prompt + 1]});
  }
  steps[3].insert(steps[3].begin(), std::vector<int32_t>{});  // joins one step late
  steps[3].pop_back();

  // Alone: one sequence per batch.
  std::vector<std::vector<std::vector<float>>> alone(4);
  for (int s = 0; s < 4; ++s) {
    TestSequence seq = new_sequence(64);
    for (const auto& chunk : steps[s]) {
      alone[s].push_back(chunk.empty() ? std::vector<float>() : feed(runner(), &seq, chunk));
    }
  }
  // Together: every step is one batch of all sequences with tokens in it.
  std::vector<TestSequence> seqs;
  for (int s = 0; s < 4; ++s) seqs.push_back(new_sequence(64));
  for (int k = 0; k < 3; ++k) {
    ForwardBatch batch;
    std::vector<TestSequence*> in_batch;
    std::vector<int> ids;
    for (int s = 0; s < 4; ++s) {
      if (steps[s][k].empty()) continue;
      add_to_batch(&seqs[s], steps[s][k], runner()->kv_block_size(), &batch);
      in_batch.push_back(&seqs[s]);
      ids.push_back(s);
    }
    finish_batch(in_batch, &batch);
    const std::vector<float> logits = run(runner(), batch);
    ASSERT_EQ(logits.size(), ids.size() * config_.vocab_size);
    for (size_t i = 0; i < ids.size(); ++i) {
      check("batched step " + std::to_string(k) + " seq " + std::to_string(ids[i]),
                       row(logits, i), alone[ids[i]][k]);
    }
  }
}

// A 150-token sequence (three blocks of 64) in contiguous blocks, in shuffled blocks, and in
// a cache of 16-token blocks (shuffled too): the paging must not change any logit.
TEST_P(BatchingTest, ShuffledBlocksAndBlockSizeDoNotChangeLogits) {
  std::vector<int32_t> tokens;
  for (int c = 0; tokens.size() < 150; ++c) {
    const std::vector<int32_t> more = case_tokens(c);
    tokens.insert(tokens.end(), more.begin(), more.end());
  }
  tokens.resize(150);
  const std::span<const int32_t> prompt = std::span(tokens).first(140);

  auto run_paged = [&](CpuModelRunner* runner, std::vector<int32_t> blocks) {
    TestSequence seq;
    seq.blocks = std::move(blocks);
    std::vector<std::vector<float>> out;
    out.push_back(feed(runner, &seq, prompt));
    for (size_t i = prompt.size(); i < tokens.size(); ++i) {
      out.push_back(feed(runner, &seq, std::span(tokens).subspan(i, 1)));
    }
    return out;
  };
  const auto contiguous = run_paged(runner(), {0, 1, 2});
  const auto shuffled = run_paged(runner(), {kNumKvBlocks - 1, 7, 3});
  std::unique_ptr<CpuModelRunner> small_blocks = make_runner(16, native());
  ASSERT_NE(small_blocks, nullptr);
  std::vector<int32_t> blocks16(10);
  std::iota(blocks16.begin(), blocks16.end(), 0);
  std::shuffle(blocks16.begin(), blocks16.end(), std::mt19937(7));
  for (int32_t& b : blocks16) b = b * 17 % small_blocks->num_kv_blocks();
  const auto paged16 = run_paged(small_blocks.get(), blocks16);
  for (size_t i = 0; i < contiguous.size(); ++i) {
    check("shuffled blocks, step " + std::to_string(i), shuffled[i], contiguous[i]);
    check("16-token blocks, step " + std::to_string(i), paged16[i], contiguous[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, BatchingTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "Native" : "Fp32";
                         });

TEST_F(ModelForwardTest, StatsCountAttentionWorkPerPhase) {
  const std::vector<int32_t> tokens = case_tokens(0);
  TestSequence decoding = new_sequence(64);
  feed(runner_.get(), &decoding, std::span(tokens).first(19));  // 19 cached
  TestSequence prefilling = new_sequence(64);

  ForwardBatch batch;
  add_to_batch(&decoding, std::span(tokens).subspan(19, 1), runner_->kv_block_size(), &batch);
  add_to_batch(&prefilling, std::span(tokens).first(10), runner_->kv_block_size(), &batch);
  TestSequence* seqs[] = {&decoding, &prefilling};
  finish_batch(seqs, &batch);
  ForwardStats stats;
  std::vector<SampledToken> sampled;  // no sample_seqs: the pass runs, nothing is sampled
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(runner_->forward(batch, &sampled, &stats).ok());
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(sampled.empty());

  const double layers = config_.num_layers, h = config_.num_heads, d = config_.head_dim;
  const double kv = config_.num_kv_heads;
  EXPECT_EQ(stats.decode.calls, config_.num_layers);
  EXPECT_EQ(stats.prefill.calls, config_.num_layers);
  // Decode: 1 query sees 20 keys. Prefill: 10 queries see 1..10 keys (55 pairs).
  EXPECT_DOUBLE_EQ(stats.decode.flops, layers * 4 * 20 * h * d);
  EXPECT_DOUBLE_EQ(stats.prefill.flops, layers * 4 * 55 * h * d);
  // Q read + O written (fp32), K and V read once.
  EXPECT_DOUBLE_EQ(stats.decode.bytes, layers * 4 * (2 * 1 * h * d + 2 * 20 * kv * d));
  EXPECT_DOUBLE_EQ(stats.prefill.bytes, layers * 4 * (2 * 10 * h * d + 2 * 10 * kv * d));
  EXPECT_GT(stats.decode.seconds, 0);
  EXPECT_GT(stats.prefill.seconds, 0);
  // The time breakdown: GEMMs and the rest are timed too, as disjoint parts of the pass.
  const StepBreakdown& parts = stats.breakdown;
  ASSERT_TRUE(parts.measured);  // the CPU runner measures every step
  EXPECT_DOUBLE_EQ(parts.attention_seconds, stats.prefill.seconds + stats.decode.seconds);
  EXPECT_GT(parts.gemm_seconds, 0);
  EXPECT_GT(parts.other_seconds, 0);
  EXPECT_LE(parts.attention_seconds + parts.gemm_seconds + parts.other_seconds, wall);
}

TEST_F(ModelForwardTest, RejectsMalformedBatches) {
  const std::vector<int32_t> tokens = case_tokens(0);
  TestSequence seq = new_sequence(64);
  ForwardBatch good;
  add_to_batch(&seq, std::span(tokens).first(4), runner_->kv_block_size(), &good);
  TestSequence* seqs[] = {&seq};
  finish_batch(seqs, &good);
  std::vector<SampledToken> logits;  // sampled tokens

  ForwardBatch bad = good;
  bad.token_ids[2] = config_.vocab_size;
  EXPECT_EQ(runner_->forward(bad, &logits, nullptr).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.slot_mapping[1] += 1;
  EXPECT_EQ(runner_->forward(bad, &logits, nullptr).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.block_tables[0] = kNumKvBlocks;
  EXPECT_EQ(runner_->forward(bad, &logits, nullptr).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.seqlens_k[0] = 3;  // fewer keys than query tokens
  EXPECT_EQ(runner_->forward(bad, &logits, nullptr).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.positions[3] = 7;
  EXPECT_EQ(runner_->forward(bad, &logits, nullptr).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.sample_seqs = {1};  // only sequence 0 exists
  bad.sample_specs.resize(1);
  EXPECT_EQ(runner_->forward(bad, &logits, nullptr).code(), absl::StatusCode::kInvalidArgument);
  bad = good;
  bad.sample_seqs = {0};
  bad.sample_specs.resize(1);
  bad.sample_specs[0].penalty_end = 1;  // no penalty entries
  EXPECT_EQ(runner_->forward(bad, &logits, nullptr).code(), absl::StatusCode::kInvalidArgument);
  good.sample_seqs = {0};
  good.sample_specs.resize(1);
  EXPECT_TRUE(runner_->forward(good, &logits, nullptr).ok());
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_EQ(logits[0].token, testing::argmax(run(runner_.get(), good)));  // greedy = the argmax
}

}  // namespace
}  // namespace flashserve::model
