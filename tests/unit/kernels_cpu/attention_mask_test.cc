// The attention kernels' mask as an interval of key offsets (kernels/attention/attention_mask.h)
// against its definition, element by element: key < kv_len, causal key <= pos, and
// pos - key < window, over every offset of a 128-key tile and the geometries around the
// edges (the diagonal inside, before and after the tile; the end inside and outside; windows
// of 1 key, a few, a tile, and none).
#include "kernels/attention/attention_mask.h"

#include <gtest/gtest.h>

namespace flashserve::kernels {
namespace {

TEST(AttentionMaskTest, IntervalMatchesThePerElementTests) {
  constexpr int kNoWindow = 1 << 30;  // window_keys(0)
  int checked = 0;
  for (int kbase : {0, 2, 6, 126, 128, 254, 258, 1024}) {
    for (int kv_len : {1, 7, 127, 200, 256, 260, 1200}) {
      for (int pos = 0; pos < 1400; pos += 3) {
        for (bool causal : {false, true}) {
          for (int window : {1, 5, 64, 128, 300, kNoWindow}) {
            const KeyOffsets r = visible_key_offsets(pos, kbase, kv_len, causal, window);
            for (int c = 0; c < 128; ++c) {
              const int key = kbase + c;
              const bool want = key < kv_len && (!causal || key <= pos) && pos - key < window;
              ASSERT_EQ(offset_visible(r, c), want)
                  << "kbase " << kbase << " kv_len " << kv_len << " pos " << pos << " causal "
                  << causal << " window " << window << " c " << c;
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10'000'000);
}

TEST(AttentionMaskTest, NoWindowNeverOverflows) {
  // A query far behind the tile (pos - kbase very negative) with no window: nothing visible
  // when causal, everything up to the end otherwise; lo stays far below 0.
  const KeyOffsets r = visible_key_offsets(0, 1 << 20, (1 << 20) + 128, false, 1 << 30);
  EXPECT_LT(r.lo, -(1 << 29));
  EXPECT_EQ(r.hi, 127);
  EXPECT_FALSE(offset_visible(visible_key_offsets(0, 1 << 20, (1 << 20) + 128, true, 1 << 30), 0));
}

}  // namespace
}  // namespace flashserve::kernels
