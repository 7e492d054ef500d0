// kernels::attention_cost (kernels/attention/attention.h, plain C++) against a direct count
// of the (query, key) pairs the attention rule lets through and of the keys some query sees:
// full, causal and sliding-window (p - k < W), chunked (queries after cached keys) and decode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/attention/attention.h"

namespace flashserve::kernels {
namespace {

struct Counted {
  double pairs = 0, queries = 0, keys = 0;
};

Counted count_directly(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& k_lens,
                       bool causal, int window) {
  Counted c;
  for (size_t s = 0; s < q_lens.size(); ++s) {
    std::vector<bool> seen(k_lens[s], false);
    for (int i = 0; i < q_lens[s]; ++i) {
      const int position = k_lens[s] - q_lens[s] + i;
      for (int k = 0; k < k_lens[s]; ++k) {
        const bool visible = (!causal || k <= position) && (window <= 0 || position - k < window);
        c.pairs += visible;
        if (visible) seen[k] = true;
      }
    }
    c.queries += q_lens[s];
    // Without a window the formula counts every cached key (all are read).
    c.keys += window > 0 ? std::count(seen.begin(), seen.end(), true) : k_lens[s];
  }
  return c;
}

TEST(AttentionCost, MatchesADirectCountOfAttendedPairsAndKeys) {
  const std::vector<int32_t> q_lens = {1, 17, 97, 33, 64, 1, 5};
  const std::vector<int32_t> k_lens = {1, 17, 97, 1025, 300, 4000, 5};
  std::vector<int32_t> cu = {0};
  for (int32_t q : q_lens) cu.push_back(cu.back() + q);
  const int heads = 6, kv_heads = 2, d = 64, bytes = 2;
  for (bool causal : {false, true}) {
    for (int window : {0, 1, 16, 97, 200, 1025, 5000}) {
      if (window > 0 && !causal) continue;  // a window needs causal
      const Counted want = count_directly(q_lens, k_lens, causal, window);
      const AttentionCost got = attention_cost(cu.data(), k_lens.data(),
                                               static_cast<int>(q_lens.size()), heads, kv_heads,
                                               d, bytes, causal, window);
      SCOPED_TRACE(testing::Message() << "causal " << causal << " window " << window);
      EXPECT_DOUBLE_EQ(got.flops, 4.0 * d * heads * want.pairs);
      EXPECT_DOUBLE_EQ(got.bytes,
                       bytes * d * (2.0 * heads * want.queries + 2.0 * kv_heads * want.keys));
    }
  }
}

TEST(AttentionCost, AWindowMakesALocalLayersCostIndependentOfTheContext) {
  const int32_t cu[] = {0, 1};
  const int32_t short_ctx[] = {8192}, long_ctx[] = {131072};
  const AttentionCost a = attention_cost(cu, short_ctx, 1, 8, 2, 128, 2, true, 512);
  const AttentionCost b = attention_cost(cu, long_ctx, 1, 8, 2, 128, 2, true, 512);
  EXPECT_DOUBLE_EQ(a.flops, b.flops);
  EXPECT_DOUBLE_EQ(a.bytes, b.bytes);
  EXPECT_DOUBLE_EQ(a.flops, 4.0 * 128 * 8 * 512);
}

}  // namespace
}  // namespace flashserve::kernels
