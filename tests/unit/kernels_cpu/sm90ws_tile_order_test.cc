// The persistent Hopper prefill kernel's tile list (kernels/attention/sm90ws_tile_order.h):
// every tile once, longest row blocks first within a section, sections that fit the L2
// budget, and CTA walks that together take every list entry exactly once.
#include "kernels/attention/sm90ws_tile_order.h"

#include <set>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace flashserve::kernels {
namespace {

struct Shape {
  int m_blocks, num_heads, num_seqs, section_heads;
};

TEST(Sm90wsTileOrderTest, TheListHoldsEveryTileOnceLongestFirstInEachSection) {
  for (const Shape s : {Shape{3, 32, 32, 7}, Shape{64, 16, 2, 5}, Shape{6, 9, 64, 1},
                        Shape{43, 32, 2, 1 << 20}, Shape{1, 1, 1, 1}}) {
    const int num_l = s.m_blocks * s.num_heads * s.num_seqs;
    std::set<std::tuple<int, int, int>> seen;
    int prev_section_m = s.m_blocks;  // within a section the row blocks never rise
    int prev_section = 0;
    const int per_section = s.section_heads * s.m_blocks;
    for (int l = 0; l < num_l; ++l) {
      const Sm90wsTile t = sm90ws_list_tile(l, s.m_blocks, s.num_heads, s.num_seqs,
                                            s.section_heads);
      ASSERT_GE(t.seq, 0);
      ASSERT_LT(t.seq, s.num_seqs);
      ASSERT_GE(t.head, 0);
      ASSERT_LT(t.head, s.num_heads);
      ASSERT_GE(t.m_block, 0);
      ASSERT_LT(t.m_block, s.m_blocks);
      EXPECT_TRUE(seen.insert({t.seq, t.head, t.m_block}).second) << "tile twice at " << l;
      // The pairs of a section are consecutive f = seq * num_heads + head.
      const int f = t.seq * s.num_heads + t.head;
      EXPECT_EQ(f / s.section_heads, l / per_section) << l;
      if (l / per_section != prev_section) {
        prev_section = l / per_section;
        prev_section_m = s.m_blocks;
      }
      EXPECT_LE(t.m_block, prev_section_m) << l;
      prev_section_m = t.m_block;
    }
    EXPECT_EQ(static_cast<int>(seen.size()), num_l);
  }
}

TEST(Sm90wsTileOrderTest, TheCtasWalksTakeEveryEntryOnceInZigzag) {
  for (const auto& [grid, num_l] : {std::pair{132, 3072}, std::pair{132, 100}, std::pair{132, 133},
                                   std::pair{7, 50}, std::pair{1, 5}}) {
    std::vector<int> taken(num_l, 0);
    for (int c = 0; c < grid; ++c) {
      for (int k = 0;; ++k) {
        const int l = sm90ws_walk_entry(k, grid, c, num_l);
        if (l < 0) {
          // Past the end for good: later steps only go further.
          EXPECT_LT(sm90ws_walk_entry(k + 1, grid, c, num_l), 0);
          break;
        }
        ++taken[l];
        // Round k holds entries [k * grid, (k + 1) * grid); odd rounds run backwards.
        EXPECT_EQ(l / grid, k);
        EXPECT_EQ(l % grid, (k & 1) ? grid - 1 - c : c);
      }
    }
    for (int l = 0; l < num_l; ++l) EXPECT_EQ(taken[l], 1) << "entry " << l;
  }
}

TEST(Sm90wsTileOrderTest, SectionsHoldTheHeadsWhoseKvFitsTheBudget) {
  // d128 bf16, 8k keys, no GQA: 8192 x 128 x 2 x 2 = 4 MiB a head -> 6 heads in 24 MiB.
  EXPECT_EQ(sm90ws_section_heads(8192, 128, 16, 16, 2), 6);
  // GQA 32/8: four query heads share one K/V head's 4 MiB -> 24.
  EXPECT_EQ(sm90ws_section_heads(8192, 128, 32, 8, 2), 24);
  // Short sequences: 512 keys at d64 are 128 KiB a head -> 192 heads a section.
  EXPECT_EQ(sm90ws_section_heads(512, 64, 32, 32, 2), 192);
  // Past the budget a head is a section alone.
  EXPECT_EQ(sm90ws_section_heads(1 << 20, 128, 16, 16, 2), 1);
}

}  // namespace
}  // namespace flashserve::kernels
