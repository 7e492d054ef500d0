// The start-up warm-up's steps (model/cuda/warm_up.h): their sizes, their sequences and
// blocks, and that each is a batch the runners accept. Needs no GPU.
#include "model/cuda/warm_up.h"

#include <gtest/gtest.h>

#include <set>

#include "model/batch_validation.h"
#include "model/config.h"

namespace flashserve::model::cuda {
namespace {

ModelConfig config(int context_length, int vocab_size) {
  ModelConfig c;
  c.context_length = context_length;
  c.vocab_size = vocab_size;
  return c;
}

std::vector<int> sizes(const std::vector<ForwardBatch>& steps) {
  std::vector<int> out;
  for (const ForwardBatch& b : steps) out.push_back(b.num_tokens());
  return out;
}

TEST(WarmUpTest, PowersOfTwoFrom128ThenTheLargestStep) {
  EXPECT_EQ(sizes(warm_up_batches(2048, 8192, 49152, 1000, 64)),
            (std::vector<int>{128, 256, 512, 1024, 2048}));
  EXPECT_EQ(sizes(warm_up_batches(3000, 8192, 49152, 1000, 64)),
            (std::vector<int>{128, 256, 512, 1024, 2048, 3000}));
  EXPECT_EQ(sizes(warm_up_batches(128, 8192, 49152, 1000, 64)), (std::vector<int>{128}));
  EXPECT_EQ(sizes(warm_up_batches(40, 8192, 49152, 1000, 64)), (std::vector<int>{40}));
  EXPECT_TRUE(warm_up_batches(0, 8192, 49152, 1000, 64).empty());
}

TEST(WarmUpTest, SequencesOfAtMostTheContextOrTheLongestQueryEachInFreshBlocks) {
  const ModelConfig c = config(/*context_length=*/8192, /*vocab_size=*/100);
  for (const ForwardBatch& b : warm_up_batches(5000, c.context_length, c.vocab_size, 1000, 64)) {
    SCOPED_TRACE(b.num_tokens());
    EXPECT_TRUE(validate_forward_batch(b, c, 1000, 64).ok())
        << validate_forward_batch(b, c, 1000, 64);
    std::set<int32_t> slots(b.slot_mapping.begin(), b.slot_mapping.end());
    EXPECT_EQ(slots.size(), b.slot_mapping.size()) << "two tokens share a KV slot";
    for (int s = 0; s < b.num_seqs(); ++s) {
      const int len = b.cu_seqlens_q[s + 1] - b.cu_seqlens_q[s];
      EXPECT_LE(len, kWarmUpMaxSeqLen);
      EXPECT_EQ(b.seqlens_k[s], len) << "a prefill from position 0";
      EXPECT_EQ(b.positions[b.cu_seqlens_q[s]], 0);
    }
    EXPECT_EQ(b.sample_seqs, std::vector<int32_t>{b.num_seqs() - 1});
    for (int32_t id : b.token_ids) EXPECT_LT(id, c.vocab_size);
  }
  // 5,000 tokens: sequences of 2,048, 2,048 and 904 tokens.
  const ForwardBatch last = warm_up_batches(5000, 8192, 100, 1000, 64).back();
  EXPECT_EQ(last.cu_seqlens_q, (std::vector<int32_t>{0, 2048, 4096, 5000}));
  // A short context bounds the sequences instead.
  const ForwardBatch short_ctx = warm_up_batches(512, 200, 100, 1000, 64).back();
  EXPECT_EQ(short_ctx.cu_seqlens_q, (std::vector<int32_t>{0, 200, 400, 512}));
  EXPECT_TRUE(validate_forward_batch(short_ctx, config(200, 100), 1000, 64).ok());
}

TEST(WarmUpTest, StepsThatNeedMoreBlocksThanTheCacheHasAreLeftOut) {
  // 2,048 tokens need 32 blocks of 64; 16 blocks hold the steps up to 1,024 tokens.
  EXPECT_EQ(sizes(warm_up_batches(2048, 8192, 49152, 16, 64)),
            (std::vector<int>{128, 256, 512, 1024}));
  EXPECT_TRUE(warm_up_batches(2048, 8192, 49152, 1, 64).empty());
}

}  // namespace
}  // namespace flashserve::model::cuda
