// The Hopper prefill's row blocks aligned to the sequence's end (kernels/attention/
// row_blocks.h): every row of every length in exactly one block, whole blocks but the first,
// empty blocks past the first row, and the tile steps the causal walk saves at d64 s512.
#include "kernels/attention/row_blocks.h"

#include <gtest/gtest.h>

#include <vector>

namespace flashserve::kernels {
namespace {

TEST(RowBlocksTest, EveryRowInExactlyOneBlockAndOnlyTheFirstPartial) {
  for (int block_m : {128, 192}) {
    for (int q_len = 1; q_len <= 3000; ++q_len) {
      const int blocks = (q_len + block_m - 1) / block_m;
      std::vector<int> seen(q_len, 0);
      for (int j = 0; j < blocks; ++j) {
        const RowBlock b = row_block_from_end(q_len, j, block_m);
        ASSERT_GT(b.rows, 0) << "q_len " << q_len << " block " << j;
        ASSERT_GE(b.m_base, 0);
        ASSERT_EQ(b.m_base + b.rows, q_len - j * block_m);  // aligned to the end
        if (j < blocks - 1) {
          ASSERT_EQ(b.rows, block_m) << "q_len " << q_len << " block " << j;
        } else {
          ASSERT_EQ(b.m_base, 0) << "q_len " << q_len;
        }
        for (int r = b.m_base; r < b.m_base + b.rows; ++r) ++seen[r];
      }
      for (int r = 0; r < q_len; ++r) ASSERT_EQ(seen[r], 1) << "q_len " << q_len << " row " << r;
      // A walk sized by a longer sequence: the blocks past this one's first row are empty.
      for (int j = blocks; j < blocks + 3; ++j) {
        EXPECT_LE(row_block_from_end(q_len, j, block_m).rows, 0);
      }
    }
  }
}

// Tile steps of a causal row-block walk (q_len queries on q_len keys, 128-key tiles): a block
// walks the tiles up to its last row.
int causal_steps(int q_len, int block_m) {
  int steps = 0;
  for (int j = 0; j < (q_len + block_m - 1) / block_m; ++j) {
    const RowBlock b = row_block_from_end(q_len, j, block_m);
    steps += (b.m_base + b.rows + 127) / 128;
  }
  return steps;
}

TEST(RowBlocksTest, TheCausalWalkOfD64TakesFewerSteps) {
  // 192-row blocks (d64): NOTES.md v51's counts, against 9, 32 and 101 with the partial block
  // last.
  EXPECT_EQ(causal_steps(512, 192), 8);
  EXPECT_EQ(causal_steps(1024, 192), 27);
  EXPECT_EQ(causal_steps(2048, 192), 96);
  // 128-row blocks (d128) over multiples of 128: no partial block, the same as before.
  EXPECT_EQ(causal_steps(512, 128), 1 + 2 + 3 + 4);
}

}  // namespace
}  // namespace flashserve::kernels
