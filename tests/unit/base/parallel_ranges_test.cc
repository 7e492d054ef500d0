// base/parallel_ranges.h: every index of [0, n) once, in ranges of at least min_items, and
// small loops on the calling thread.
#include "base/parallel_ranges.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace flashserve {
namespace {

TEST(ParallelRangesTest, CoversEveryIndexOnce) {
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{1} << 20, int64_t{1000003}}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::mutex mu;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    parallel_ranges(n, 1000, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      std::lock_guard<std::mutex> lock(mu);
      ranges.emplace_back(b, e);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
    for (const auto& [b, e] : ranges) {
      EXPECT_LT(b, e);
      // Every range but the last holds at least min_items (or all of a small loop).
      if (e != n) EXPECT_GE(e - b, 1000) << n;
    }
  }
}

TEST(ParallelRangesTest, SmallLoopsStayOnTheCallingThread) {
  std::set<std::thread::id> ids;
  parallel_ranges(999, 1000, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 999);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids, std::set<std::thread::id>{std::this_thread::get_id()});
  int calls = 0;
  parallel_ranges(0, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace flashserve
