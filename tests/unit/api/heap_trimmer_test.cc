// HeapTrimmer (server/api/heap_trimmer.h): freed memory that glibc kept goes back to the
// system; memory in use is left alone.
#include "server/api/heap_trimmer.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace flashserve::api {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Polls `done` every 10 ms for at most 5 s.
template <typename F>
bool eventually(F done) {
  for (int i = 0; i < 500 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// glibc's heap only: under ASan or TSan malloc is the sanitizer's allocator (freed blocks
// wait in its quarantine, malloc_trim does not reach them), so scripts/sanitize.sh builds
// leave these out.
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// `n` blocks of 64 KiB (below glibc's mmap threshold: on the heap), touched, then 100 ms for
// the trimmer (looking every 20 ms) to see them in use: its free mark starts at its first
// look, and what was free then is not a burst.
std::vector<void*> blocks_in_use(int n) {
  std::vector<void*> blocks(n);
  for (void*& p : blocks) {
    p = std::malloc(64 << 10);
    std::memset(p, 1, 64 << 10);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return blocks;
}

// 128 MiB touched and kept: nothing is free, nothing is trimmed.
TEST(HeapTrimmerTest, MemoryInUseIsLeftAlone) {
  HeapTrimmer trimmer(std::chrono::milliseconds(20), 16 * kMiB);
  std::vector<void*> used;
  for (int i = 0; i < 65536; ++i) {
    used.push_back(std::malloc(2048));
    std::memset(used.back(), 1, 2048);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(trimmer.num_trims(), 0);
  for (void* p : used) std::free(p);
}

// 128 MiB in 64 KiB blocks (below glibc's mmap threshold: on the heap), every other one freed:
// 64 MiB free between blocks still in use, which glibc cannot give back on its own.
TEST(HeapTrimmerTest, FreedBurstGoesBackToTheSystem) {
  HeapTrimmer trimmer(std::chrono::milliseconds(20), 16 * kMiB);
  const std::vector<void*> blocks = blocks_in_use(2048);
  const int64_t peak = resident_bytes();
  for (size_t i = 0; i < blocks.size(); i += 2) std::free(blocks[i]);
  EXPECT_TRUE(eventually([&] { return peak - resident_bytes() > 48 * kMiB; }))
      << "given back " << (peak - resident_bytes()) / kMiB << " MiB of 64";
  // The count goes up once malloc_trim returns, after the pages it gave back already left
  // the resident set: wait for it too.
  EXPECT_TRUE(eventually([&] { return trimmer.num_trims() >= 1; }));
  for (size_t i = 1; i < blocks.size(); i += 2) std::free(blocks[i]);
}

// 48 MiB in 64 KiB blocks, every other one freed: 24 MiB free, below the 64 MiB threshold, so
// only the quiet rule gives it back (three quiet looks, 20 ms apart).
TEST(HeapTrimmerTest, BurstBelowTheThresholdGoesBackOnceQuiet) {
  HeapTrimmer trimmer(std::chrono::milliseconds(20), 64 * kMiB);
  const std::vector<void*> blocks = blocks_in_use(768);
  const int64_t peak = resident_bytes();
  for (size_t i = 0; i < blocks.size(); i += 2) std::free(blocks[i]);
  EXPECT_TRUE(eventually([&] { return peak - resident_bytes() > 16 * kMiB; }))
      << "given back " << (peak - resident_bytes()) / kMiB << " MiB of 24";
  EXPECT_TRUE(eventually([&] { return trimmer.num_trims() >= 1; }));
  for (size_t i = 1; i < blocks.size(); i += 2) std::free(blocks[i]);
}
#endif

}  // namespace
}  // namespace flashserve::api
