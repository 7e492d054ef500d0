// Host side of the decode graphs (model/cuda/decode_graph.h): the bucket table and the
// padding, which decide what every graph bakes in. Needs no GPU.
#include "model/cuda/decode_graph.h"

#include <gtest/gtest.h>

#include <set>

namespace flashserve::model::cuda {
namespace {

TEST(DecodeBucketTest, ExactUpToEightThenAtMostAQuarterPadding) {
  for (int n = 1; n <= 8; ++n) EXPECT_EQ(decode_bucket(n), n);
  std::set<int> buckets;
  int previous = 0;
  for (int n = 1; n <= 1024; ++n) {
    const int b = decode_bucket(n);
    EXPECT_GE(b, n);
    EXPECT_LE(4 * (b - n), n) << "n " << n << " bucket " << b;  // padding <= n / 4
    EXPECT_GE(b, previous) << "n " << n;                        // monotone
    EXPECT_EQ(decode_bucket(b), b) << "a bucket is its own bucket";
    previous = b;
    buckets.insert(b);
  }
  EXPECT_EQ(decode_bucket(9), 10);
  EXPECT_EQ(decode_bucket(17), 20);
  EXPECT_EQ(decode_bucket(256), 256);
  EXPECT_EQ(decode_bucket(257), 320);
  EXPECT_LE(buckets.size(), 40u);  // 8 exact + 4 per doubling from 8 to 1024
}

ForwardBatch two_decodes() {
  ForwardBatch b;
  b.token_ids = {11, 12};
  b.positions = {70, 3};
  b.cu_seqlens_q = {0, 1, 2};
  b.seqlens_k = {71, 4};
  b.max_blocks_per_seq = 2;
  b.block_tables = {5, 9, 7, -1};
  b.slot_mapping = {9 * 64 + 6, 7 * 64 + 3};
  b.sample_seqs = {0, 1};
  b.sample_specs.resize(2);
  b.sample_specs[1].temperature = 0.5f;
  b.penalty_tokens = {4};
  b.penalty_counts = {2};
  return b;
}

TEST(DecodeBatchTest, OnlyOneTokenPerSequenceAllSampledInOrder) {
  ForwardBatch b = two_decodes();
  EXPECT_TRUE(is_decode_batch(b));
  ForwardBatch unsampled = b;
  unsampled.sample_seqs = {0};
  unsampled.sample_specs.resize(1);
  EXPECT_FALSE(is_decode_batch(unsampled));
  ForwardBatch prefill = b;
  prefill.token_ids.push_back(13);
  prefill.positions.push_back(4);
  prefill.slot_mapping.push_back(7 * 64 + 4);
  prefill.cu_seqlens_q = {0, 1, 3};
  prefill.seqlens_k = {71, 5};
  EXPECT_FALSE(is_decode_batch(prefill));
  EXPECT_FALSE(is_decode_batch(ForwardBatch{}));
}

TEST(DecodeBatchTest, PaddingKeepsRealRowsAndMakesPaddingRowsInert) {
  const ForwardBatch b = two_decodes();
  const ForwardBatch p = pad_decode_batch(b, 4, 4);
  ASSERT_EQ(p.num_seqs(), 4);
  ASSERT_EQ(p.num_tokens(), 4);
  EXPECT_EQ(p.token_ids, (std::vector<int32_t>{11, 12, 0, 0}));
  EXPECT_EQ(p.positions, (std::vector<int32_t>{70, 3, 0, 0}));
  EXPECT_EQ(p.cu_seqlens_q, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p.seqlens_k, (std::vector<int32_t>{71, 4, 0, 0}));  // padding reads no keys
  EXPECT_EQ(p.slot_mapping, (std::vector<int32_t>{9 * 64 + 6, 7 * 64 + 3, -1, -1}));
  EXPECT_EQ(p.max_blocks_per_seq, 4);
  EXPECT_EQ(p.block_tables,
            (std::vector<int32_t>{5, 9, -1, -1, 7, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}));
  EXPECT_EQ(p.sample_seqs, (std::vector<int32_t>{0, 1, 2, 3}));
  ASSERT_EQ(p.sample_specs.size(), 4u);
  EXPECT_EQ(p.sample_specs[1].temperature, 0.5f);
  EXPECT_EQ(p.sample_specs[3].temperature, 0.f);  // greedy default
  EXPECT_EQ(p.penalty_tokens, b.penalty_tokens);
  EXPECT_EQ(p.penalty_counts, b.penalty_counts);
  EXPECT_TRUE(is_decode_batch(p));
  EXPECT_EQ(pad_decode_batch(b, 2, 2).block_tables, b.block_tables);  // no padding: unchanged
  EXPECT_TRUE(p.previous_samples.empty());  // none given, none made up
}

// An overlapped decode step's tokens from the previous step's samples stay where they are;
// the padding rows take theirs from token_ids (0).
TEST(DecodeBatchTest, PaddingKeepsPreviousSamples) {
  ForwardBatch b = two_decodes();
  b.token_ids = {0, 12};
  b.previous_samples = {3, -1};
  const ForwardBatch p = pad_decode_batch(b, 4, 4);
  EXPECT_EQ(p.token_ids, (std::vector<int32_t>{0, 12, 0, 0}));
  EXPECT_EQ(p.previous_samples, (std::vector<int32_t>{3, -1, -1, -1}));
}

}  // namespace
}  // namespace flashserve::model::cuda
