// resolve_kv_cache (model/memory_budget.h): the one KV-cache sizing rule of both backends.
// Sizes past any machine are resolved without allocating anything.
#include "model/memory_budget.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace flashserve::model {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

KvCacheGeometry geometry() {
  KvCacheGeometry g;
  g.bytes_per_block = kMiB / 2;  // two blocks a MiB
  g.block_size = 64;
  g.available_bytes = 100 * kMiB;
  g.default_bytes = 10 * kMiB;
  g.default_source = "the default of 10 MiB";
  g.memory_name = "test memory";
  g.min_blocks = 4;
  return g;
}

TEST(MemoryBudgetTest, FirstSetFieldWinsAndNamesItself) {
  auto b = resolve_kv_cache({.num_kv_blocks = 7, .kv_cache_tokens = 6400, .kv_cache_mb = 3}, geometry());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->num_blocks, 7);
  EXPECT_EQ(b->source, "num_kv_blocks 7");
  b = resolve_kv_cache({.kv_cache_tokens = 6401, .kv_cache_mb = 3}, geometry());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->num_blocks, 101);  // rounded up to whole blocks
  EXPECT_EQ(b->source, "kv_cache_tokens 6401");
  b = resolve_kv_cache({.kv_cache_mb = 3}, geometry());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->num_blocks, 6);
  EXPECT_EQ(b->bytes, 3 * kMiB);
  EXPECT_EQ(b->source, "kv_cache_mb 3");
}

TEST(MemoryBudgetTest, DefaultIsClampedToWhatIsAvailable) {
  auto b = resolve_kv_cache({}, geometry());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->num_blocks, 20);
  EXPECT_EQ(b->source, "the default of 10 MiB");
  KvCacheGeometry g = geometry();
  g.available_bytes = 3 * kMiB;
  b = resolve_kv_cache({}, g);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->num_blocks, 6);
}

TEST(MemoryBudgetTest, RequestsPastTheMachineAreRefusedByName) {
  for (const KvCacheRequest& r :
       {KvCacheRequest{.kv_cache_mb = 101}, KvCacheRequest{.kv_cache_mb = 2147483647},
        KvCacheRequest{.kv_cache_mb = std::numeric_limits<int64_t>::max()},
        KvCacheRequest{.kv_cache_tokens = 2000000000},
        KvCacheRequest{.kv_cache_tokens = std::numeric_limits<int64_t>::max()},
        KvCacheRequest{.num_kv_blocks = 201}}) {
    auto b = resolve_kv_cache(r, geometry());
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(b.status().message().find("test memory"), std::string::npos) << b.status();
    EXPECT_NE(b.status().message().find("100.0 MiB available"), std::string::npos) << b.status();
  }
  auto b = resolve_kv_cache({.kv_cache_mb = 2147483647}, geometry());
  EXPECT_NE(b.status().message().find("kv_cache_mb 2147483647"), std::string::npos) << b.status();
}

TEST(MemoryBudgetTest, TooFewBlocksForTheBatchNamesTheSequences) {
  auto b = resolve_kv_cache({.num_kv_blocks = 3}, geometry());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("max_num_seqs 4"), std::string::npos) << b.status();
  KvCacheGeometry g = geometry();
  g.available_bytes = -5 * kMiB;  // the weights alone took more than the machine has
  b = resolve_kv_cache({}, g);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MemoryBudgetTest, NegativeRequestsAreInvalid) {
  auto b = resolve_kv_cache({.kv_cache_mb = -1}, geometry());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MemoryBudgetTest, HostMemoryIsReadable) {
  EXPECT_GT(host_memory_bytes(), 0);
  EXPECT_GT(host_available_bytes(), 0);
  EXPECT_LE(host_available_bytes(), host_memory_bytes());
}

// A fixed allocation (weights, a workspace) past what is available is refused, naming what
// asked and what is there; sizes past any machine cost nothing.
TEST(MemoryBudgetTest, CheckFitsRefusesWhatIsNotAvailable) {
  EXPECT_TRUE(check_fits("weights", 10 * kMiB, 10 * kMiB, "test memory").ok());
  const absl::Status refused = check_fits("max_batch_tokens 2000000000: the step workspace",
                                          int64_t{1} << 50, 10 * kMiB, "test memory");
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "max_batch_tokens 2000000000: the step workspace takes 1073741824.0 MiB but test "
            "memory has 10.0 MiB available");
  // Nothing left (the weights took it all) reads as 0, not as a negative amount.
  EXPECT_NE(check_fits("x", 1, -5 * kMiB, "m").message().find("m has 0.0 MiB available"),
            std::string::npos);
}

}  // namespace
}  // namespace flashserve::model
