// The prefix cache in the block manager and the scheduler: which blocks are registered,
// found, shared, kept and evicted, and what a sequence computes when its prefix is cached.
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/block_manager.h"
#include "server/engine/scheduler.h"

namespace flashserve::engine {
namespace {

constexpr int kBlockSize = 4;
const BlockHash kSeed = block_hash_seed("test-model");

std::vector<int32_t> tokens_of(std::initializer_list<int32_t> ids) { return ids; }

// Allocates `tokens` into a fresh table and registers its computed full blocks, as the
// scheduler does for a sequence that ran its whole prefill.
BlockTable compute(BlockManager& bm, const std::vector<int32_t>& tokens,
                   std::vector<BlockHash>* hashes) {
  BlockTable table;
  const PrefixMatch match = bm.find_prefix(tokens, hashes);
  EXPECT_TRUE(bm.can_allocate(match, static_cast<int>(tokens.size())));
  bm.share(match, static_cast<int>(tokens.size()), &table);
  bm.allocate(&table, static_cast<int>(tokens.size()));
  bm.register_full_blocks(tokens, static_cast<int>(tokens.size()), table, hashes);
  return table;
}

TEST(BlockHashTest, ChainsOverTheWholePrefixAndTheSeed) {
  const std::vector<int32_t> a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  const BlockHash ha = chain_block_hash(kSeed, a);
  EXPECT_EQ(ha, chain_block_hash(kSeed, a));
  EXPECT_NE(chain_block_hash(ha, b), chain_block_hash(chain_block_hash(kSeed, b), b));
  EXPECT_NE(ha, chain_block_hash(block_hash_seed("other-model"), a));
  EXPECT_NE(ha, chain_block_hash(kSeed, std::vector<int32_t>{1, 2, 4, 3}));
  EXPECT_NE(chain_block_hash(kSeed, std::vector<int32_t>{0}),
            chain_block_hash(kSeed, std::vector<int32_t>{0, 0}));
}

TEST(PrefixCacheTest, FindsTheLongestCachedPrefixBeforeTheLastToken) {
  BlockManager bm(16, kBlockSize, kSeed);
  std::vector<BlockHash> ha;
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};  // 2 full blocks + 2
  BlockTable ta = compute(bm, a, &ha);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_TRUE(bm.is_cached(ta[0]) && bm.is_cached(ta[1]) && !bm.is_cached(ta[2]));

  // Same first block, different second: one block shared.
  std::vector<BlockHash> hb;
  const std::vector<int32_t> b = {1, 2, 3, 4, 5, 6, 7, 0, 9};
  PrefixMatch m = bm.find_prefix(b, &hb);
  EXPECT_EQ(m.blocks, (std::vector<int32_t>{ta[0]}));
  EXPECT_EQ(m.num_unreferenced, 0);  // a still holds it

  // Exactly the two cached blocks: the second holds the last token, so only the first.
  std::vector<BlockHash> hc;
  m = bm.find_prefix(tokens_of({1, 2, 3, 4, 5, 6, 7, 8}), &hc);
  EXPECT_EQ(m.blocks, (std::vector<int32_t>{ta[0]}));
  m = bm.find_prefix(tokens_of({1, 2, 3, 4, 5, 6, 7, 8, 40}), &hc);
  EXPECT_EQ(m.blocks, (std::vector<int32_t>{ta[0], ta[1]}));

  // A different first block hides an equal second block (chained hashes).
  std::vector<BlockHash> hd;
  EXPECT_TRUE(bm.find_prefix(tokens_of({0, 2, 3, 4, 5, 6, 7, 8, 9}), &hd).blocks.empty());

  bm.free(&ta);
}

TEST(PrefixCacheTest, ChainsOfDifferentSeedsDiffer) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5};
  BlockManager m1(4, kBlockSize, block_hash_seed("model-1"));
  BlockManager m2(4, kBlockSize, block_hash_seed("model-2"));
  std::vector<BlockHash> h1, h2;
  BlockTable t1 = compute(m1, a, &h1);
  BlockTable t2 = compute(m2, a, &h2);
  ASSERT_EQ(h1.size(), 1u);
  ASSERT_EQ(h2.size(), 1u);
  EXPECT_NE(h1[0], h2[0]);
  m1.free(&t1);
  m2.free(&t2);
}

TEST(PrefixCacheTest, SharedBlocksAreRefCountedAndCachedUntilEvicted) {
  BlockManager bm(4, kBlockSize, kSeed);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // blocks: 2 full + 1
  std::vector<BlockHash> ha, hb;
  BlockTable ta = compute(bm, a, &ha);
  BlockTable tb = compute(bm, a, &hb);  // shares 2, owns 1
  EXPECT_EQ(tb[0], ta[0]);
  EXPECT_EQ(tb[1], ta[1]);
  EXPECT_NE(tb[2], ta[2]);
  EXPECT_EQ(bm.num_refs(ta[0]), 2);
  EXPECT_EQ(bm.num_used_blocks(), 4);
  EXPECT_EQ(bm.prefix_stats().num_queried_tokens, 18);
  EXPECT_EQ(bm.prefix_stats().num_hit_tokens, 8);

  bm.free(&ta);
  EXPECT_EQ(bm.num_refs(tb[0]), 1);
  EXPECT_EQ(bm.num_used_blocks(), 3);
  const BlockTable kept = tb;
  bm.free(&tb);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_EQ(bm.num_cached_blocks(), 2);  // still there for the next sequence

  // Free blocks go first; then the least recently released cached block, a chain's tail
  // before its head.
  BlockTable c;
  bm.allocate(&c, 8);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_EQ(bm.prefix_stats().num_evictions, 0);
  bm.allocate(&c, 12);
  EXPECT_EQ(c.back(), kept[1]);
  EXPECT_FALSE(bm.is_cached(kept[1]));
  EXPECT_TRUE(bm.is_cached(kept[0]));
  EXPECT_EQ(bm.prefix_stats().num_evictions, 1);
  std::vector<BlockHash> hc;
  EXPECT_EQ(bm.find_prefix(a, &hc).blocks, (std::vector<int32_t>{kept[0]}));
  bm.free(&c);
}

TEST(PrefixCacheTest, CanAllocateCountsUnreferencedMatchedBlocksAsTaken) {
  BlockManager bm(3, kBlockSize, kSeed);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<BlockHash> ha;
  BlockTable ta = compute(bm, a, &ha);
  bm.free(&ta);  // 2 cached blocks, all 3 free
  std::vector<BlockHash> hb;
  const PrefixMatch m = bm.find_prefix(a, &hb);
  ASSERT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.num_unreferenced, 2);
  EXPECT_TRUE(bm.can_allocate(m, 12));    // 2 shared + 1 new
  EXPECT_FALSE(bm.can_allocate(m, 13));   // 2 shared + 2 new > 3
}

TEST(PrefixCacheTest, OffMeansNoSharingAndNoRegistration) {
  BlockManager bm(8, kBlockSize);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<BlockHash> ha, hb;
  BlockTable ta = compute(bm, a, &ha);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  EXPECT_TRUE(bm.find_prefix(a, &hb).blocks.empty());
  bm.free(&ta);
  EXPECT_EQ(bm.prefix_stats().num_queried_tokens, 0);
}

TEST(PrefixCacheTest, BlockComputedTwiceAtOnceIsRegisteredOnce) {
  BlockManager bm(8, kBlockSize, kSeed);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5};
  std::vector<BlockHash> ha, hb;
  BlockTable ta, tb;
  bm.allocate(&ta, 5);
  bm.allocate(&tb, 5);
  bm.register_full_blocks(a, 5, ta, &ha);
  bm.register_full_blocks(a, 5, tb, &hb);
  EXPECT_TRUE(bm.is_cached(ta[0]));
  EXPECT_FALSE(bm.is_cached(tb[0]));
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  bm.free(&ta);
  bm.free(&tb);
  EXPECT_EQ(bm.num_free_blocks(), 8);
}

// Random sequences over a few shared prefixes: reference counts always equal the number of
// tables holding a block, no block is in two places, nothing leaks.
TEST(PrefixCacheTest, RandomWorkloadKeepsCountsExact) {
  constexpr int kNumBlocks = 23;
  BlockManager bm(kNumBlocks, kBlockSize, kSeed);
  std::mt19937 rng(11);
  struct Live {
    std::vector<int32_t> tokens;
    std::vector<BlockHash> hashes;
    BlockTable table;
  };
  std::vector<Live> live;
  for (int iter = 0; iter < 4000; ++iter) {
    if (!live.empty() && rng() % 3 == 0) {
      const size_t i = rng() % live.size();
      bm.free(&live[i].table);
      live.erase(live.begin() + i);
    } else {
      Live l;
      const int prefix = static_cast<int>(rng() % 3);
      const int len = 1 + static_cast<int>(rng() % 14);
      for (int t = 0; t < len; ++t) l.tokens.push_back(t < 8 ? prefix * 100 + t : rng() % 5);
      const PrefixMatch m = bm.find_prefix(l.tokens, &l.hashes);
      if (!bm.can_allocate(m, len)) continue;
      bm.share(m, len, &l.table);
      bm.allocate(&l.table, len);
      bm.register_full_blocks(l.tokens, len, l.table, &l.hashes);
      live.push_back(std::move(l));
    }
    std::vector<int> refs(kNumBlocks, 0);
    for (const Live& l : live) {
      ASSERT_EQ(static_cast<int>(l.table.size()), bm.num_blocks_for(l.tokens.size()));
      for (int32_t b : l.table) ++refs[b];
    }
    int num_used = 0;
    for (int b = 0; b < kNumBlocks; ++b) {
      ASSERT_EQ(refs[b], bm.num_refs(b)) << "block " << b;
      // A block shared by two tables must be a registered full block.
      if (refs[b] > 1) {
        ASSERT_TRUE(bm.is_cached(b));
      }
      num_used += refs[b] > 0;
    }
    ASSERT_EQ(num_used, bm.num_used_blocks());
  }
  for (Live& l : live) bm.free(&l.table);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(bm.num_free_blocks(), kNumBlocks);
  EXPECT_GT(bm.prefix_stats().num_hit_tokens, 0);
  EXPECT_GT(bm.prefix_stats().num_evictions, 0);
}

// ---- scheduler ----------------------------------------------------------------------------

std::unique_ptr<Sequence> make_seq(uint64_t id, std::vector<int32_t> prompt) {
  return std::make_unique<Sequence>(id, std::move(prompt), Sequence::Clock::now());
}

std::vector<int32_t> shared_prompt(int len, int32_t tail) {
  std::vector<int32_t> p;
  for (int i = 0; i < len - 1; ++i) p.push_back(100 + i);
  p.push_back(tail);
  return p;
}

TEST(PrefixCacheSchedulerTest, AdmissionComputesOnlyWhatIsNotCached) {
  BlockManager bm(16, kBlockSize, kSeed);
  Scheduler sched({.max_num_seqs = 4, .max_batch_tokens = 100}, &bm);
  auto a = make_seq(1, shared_prompt(10, 7));
  sched.add(a.get());
  SchedulerOutput out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 10);
  sched.complete(out);
  a->append_token(50);  // what the engine samples
  EXPECT_EQ(bm.num_cached_blocks(), 2);

  auto b = make_seq(2, shared_prompt(10, 9));  // differs in the last token only
  sched.add(b.get());
  out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);  // a's decode, then b
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);
  const ScheduledSequence& sb = out.scheduled.back();
  EXPECT_EQ(sb.seq, b.get());
  EXPECT_EQ(b->num_computed_tokens(), 8);
  EXPECT_EQ(sb.num_new_tokens, 2);
  EXPECT_TRUE(sb.samples);
  EXPECT_EQ(b->block_table()[0], a->block_table()[0]);
  EXPECT_EQ(b->block_table()[1], a->block_table()[1]);
  EXPECT_NE(b->block_table()[2], a->block_table()[2]);
  sched.finish(a.get());
  sched.finish(b.get());
  EXPECT_EQ(bm.num_used_blocks(), 0);
}

TEST(PrefixCacheSchedulerTest, PreemptedSequenceFindsItsOwnPrefixCached) {
  BlockManager bm(6, kBlockSize, kSeed);
  Scheduler sched({.max_num_seqs = 4, .max_batch_tokens = 100}, &bm);
  auto a = make_seq(1, shared_prompt(12, 1));
  std::vector<int32_t> pb;
  for (int i = 0; i < 9; ++i) pb.push_back(500 + i);
  auto b = make_seq(2, pb);
  sched.add(a.get());
  sched.add(b.get());
  SchedulerOutput out = sched.schedule();  // 3 + 3 blocks: the cache is full
  ASSERT_EQ(out.scheduled.size(), 2u);
  sched.complete(out);
  a->append_token(60);
  b->append_token(61);

  out = sched.schedule();  // a's decode needs a 4th block: b is preempted
  ASSERT_EQ(out.preempted, (std::vector<Sequence*>{b.get()}));
  ASSERT_EQ(out.scheduled.size(), 1u);
  sched.complete(out);
  a->append_token(62);
  sched.finish(a.get());

  out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].seq, b.get());
  EXPECT_EQ(b->num_computed_tokens(), 8);  // its own two full blocks, still cached
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 2);
  EXPECT_EQ(bm.prefix_stats().num_hit_tokens, 8);
  sched.finish(b.get());
  EXPECT_EQ(bm.num_used_blocks(), 0);
}

}  // namespace
}  // namespace flashserve::engine
