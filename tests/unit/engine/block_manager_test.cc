#include "server/engine/block_manager.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace flashserve::engine {
namespace {

TEST(BlockManagerTest, AllocatesOnDemandAndFreesEverything) {
  BlockManager bm(/*num_blocks=*/4, /*block_size=*/4);
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_EQ(bm.num_blocks_for(0), 0);
  EXPECT_EQ(bm.num_blocks_for(4), 1);
  EXPECT_EQ(bm.num_blocks_for(5), 2);

  BlockTable a;
  ASSERT_TRUE(bm.can_allocate(a, 5));
  bm.allocate(&a, 5);
  EXPECT_EQ(a, (BlockTable{0, 1}));
  bm.allocate(&a, 8);  // still two blocks: nothing new
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(bm.num_used_blocks(), 2);
  EXPECT_EQ(bm.num_refs(0), 1);
  EXPECT_EQ(bm.num_refs(2), 0);

  BlockTable b;
  EXPECT_TRUE(bm.can_allocate(b, 8));
  EXPECT_FALSE(bm.can_allocate(b, 9));
  EXPECT_TRUE(bm.can_allocate(a, 16));   // a already holds two of the four
  EXPECT_FALSE(bm.can_allocate(a, 17));
  bm.allocate(&b, 8);
  EXPECT_EQ(bm.num_free_blocks(), 0);
  EXPECT_FALSE(bm.can_allocate(a, 9));
  EXPECT_TRUE(bm.can_allocate(a, 8));    // needs nothing new

  bm.free(&a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(bm.num_free_blocks(), 2);
  EXPECT_EQ(bm.num_refs(0), 0);
  // Freed blocks are reused last (FIFO), after the blocks free before them; a table's
  // blocks are released last block first.
  BlockTable c;
  bm.allocate(&c, 4);
  EXPECT_EQ(c, (BlockTable{1}));
  bm.free(&b);
  bm.free(&c);
  EXPECT_EQ(bm.num_used_blocks(), 0);
}

TEST(BlockManagerTest, RandomWorkloadNeverLeaksOrDoubleAllocates) {
  constexpr int kNumBlocks = 37;
  BlockManager bm(kNumBlocks, /*block_size=*/3);
  std::mt19937 rng(7);
  std::vector<BlockTable> tables(9);
  std::vector<int> num_tokens(tables.size(), 0);
  for (int iter = 0; iter < 5000; ++iter) {
    const size_t i = rng() % tables.size();
    if (rng() % 5 == 0) {
      bm.free(&tables[i]);
      num_tokens[i] = 0;
    } else {
      const int want = num_tokens[i] + 1 + static_cast<int>(rng() % 10);
      if (bm.can_allocate(tables[i], want)) {
        bm.allocate(&tables[i], want);
        num_tokens[i] = want;
      }
    }
    // Every block is either free or owned by exactly one table, and tables are tight.
    std::vector<int> owners(kNumBlocks, 0);
    int num_owned = 0;
    for (size_t t = 0; t < tables.size(); ++t) {
      ASSERT_EQ(static_cast<int>(tables[t].size()), bm.num_blocks_for(num_tokens[t]));
      for (int32_t b : tables[t]) {
        ++owners[b];
        ++num_owned;
      }
    }
    for (int b = 0; b < kNumBlocks; ++b) {
      ASSERT_LE(owners[b], 1) << "block " << b << " shared";
      ASSERT_EQ(owners[b], bm.num_refs(b));
    }
    ASSERT_EQ(num_owned, bm.num_used_blocks());
  }
  for (auto& t : tables) bm.free(&t);
  EXPECT_EQ(bm.num_used_blocks(), 0);
  EXPECT_EQ(bm.num_free_blocks(), kNumBlocks);
}

}  // namespace
}  // namespace flashserve::engine
