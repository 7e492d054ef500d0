// The engine over a runner that overlaps steps (model/runner.h launch / wait): what only an
// overlapped engine does. Every other engine test also runs overlapped (engine_overlap_test
// builds them with FLASHSERVE_TEST_OVERLAP=1).
#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/engine_test_util.h"

namespace flashserve::engine {
namespace {

using namespace ::flashserve::engine::fakes;  // NOLINT: fakes and helpers

TestEngineOptions overlapped() {
  TestEngineOptions o;
  o.overlap = true;
  return o;
}

// Steps that ran a sequence with a KV length in [seqlen_first, seqlen_last] (the tests using
// it run one request).
int steps_with(const std::vector<model::ForwardBatch>& batches, int seqlen_first, int seqlen_last) {
  int n = 0;
  for (const model::ForwardBatch& b : batches) {
    for (int s = 0; s < b.num_seqs(); ++s) {
      if (b.seqlens_k[s] >= seqlen_first && b.seqlens_k[s] <= seqlen_last) ++n;
    }
  }
  return n;
}

// Decode steps take their tokens from the device: two steps are in flight at once, the fed
// tokens are named in previous_samples (token_ids 0), and the output is the model's.
TEST(EngineOverlapTest, DecodeTokensComeFromThePreviousStepOnTheDevice) {
  TestEngine e(overlapped());
  e->start();
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<Stream>> streams;
  for (int i = 0; i < 3; ++i) {
    prompts.push_back(make_prompt(i, 5 + i));
    streams.push_back(e.submit(greedy_request(prompts.back(), 12)));
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    ASSERT_TRUE(streams[i]->wait_final());
    EXPECT_EQ(streams[i]->final_event().finish_reason, FinishReason::kLength);
    EXPECT_EQ(streams[i]->tokens(), reference_greedy(*e.state, prompts[i], 12));
    EXPECT_EQ(streams[i]->final_event().usage.completion_tokens, 12);
  }
  {
    std::lock_guard<std::mutex> lock(e.state->mu);
    EXPECT_EQ(e.state->max_in_flight, 2);
    EXPECT_GE(e.state->num_previous_sample_tokens, 3 * 10);  // all but the first decodes
  }
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
  // Only decode tokens (one query token of their sequence) are fed from the device.
  int fed = 0;
  for (const model::ForwardBatch& b : e.state->batches_copy()) {
    for (int s = 0; s < b.num_seqs(); ++s) {
      for (int t = b.cu_seqlens_q[s]; t < b.cu_seqlens_q[s + 1]; ++t) {
        if (b.previous_samples.empty() || b.previous_samples[t] < 0) continue;
        ++fed;
        EXPECT_EQ(b.cu_seqlens_q[s + 1] - b.cu_seqlens_q[s], 1);
      }
    }
  }
  std::lock_guard<std::mutex> lock(e.state->mu);
  EXPECT_EQ(fed, e.state->num_previous_sample_tokens);
}

// An end-of-generation token is seen only once the next step is launched: that step computes
// one more token for the request, which is dropped; the client sees exactly what a
// sequential engine gives, and every block comes back.
TEST(EngineOverlapTest, AStopFoundLateDropsTheTokenComputedMeanwhile) {
  TestEngine e(overlapped());
  const std::vector<int32_t> prompt = make_prompt(1, 4);
  e.state->next_token = scripted(prompt.size(), {letter('h'), letter('i'), kEos, letter('x')});
  e->start();
  auto s = e.submit(greedy_request(prompt, 8));
  ASSERT_TRUE(s->wait_final());
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kStop);
  EXPECT_EQ(s->text(), "hi");
  EXPECT_EQ(s->tokens(), (std::vector<int32_t>{letter('h'), letter('i'), kEos}));
  EXPECT_EQ(s->final_event().usage.completion_tokens, 3);
  // Steps with KV lengths 4 (prompt), 5, 6 (feeding 'i'), 7 (feeding <eos>: the late one).
  EXPECT_EQ(steps_with(e.state->batches_copy(), 4, 100), 4);
  // The late step's token was computed and dropped: not a generated token.
  EXPECT_EQ(metric(e.metrics.serialize(), "flashserve_generated_tokens_total"), 3);
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
}

// A request that reaches max_new_tokens is known to end before its last token is back: the
// scheduler leaves it out of the next step, so no token past the limit is computed.
TEST(EngineOverlapTest, TheLastTokenOfALengthLimitIsNeverFedBack) {
  TestEngine e(overlapped());
  const std::vector<int32_t> prompt = make_prompt(2, 6);
  e->start();
  auto s = e.submit(greedy_request(prompt, 5));
  ASSERT_TRUE(s->wait_final());
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kLength);
  EXPECT_EQ(s->tokens(), reference_greedy(*e.state, prompt, 5));
  // The prompt step and 4 decodes (KV lengths 6..10); the 5th token is never fed.
  EXPECT_EQ(steps_with(e.state->batches_copy(), 6, 100), 5);
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
}

}  // namespace
}  // namespace flashserve::engine
