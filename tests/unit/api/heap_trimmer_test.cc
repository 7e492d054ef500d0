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
  std::vector<void*> blocks(2048);
  for (void*& p : blocks) {
    p = std::malloc(64 << 10);
    std::memset(p, 1, 64 << 10);
  }
  const int64_t peak = resident_bytes();
  for (size_t i = 0; i < blocks.size(); i += 2) std::free(blocks[i]);
  EXPECT_TRUE(eventually([&] { return peak - resident_bytes() > 48 * kMiB; }))
      << "given back " << (peak - resident_bytes()) / kMiB << " MiB of 64";
  // The count goes up once malloc_trim returns, after the pages it gave back already left
  // the resident set: wait for it too.
  EXPECT_TRUE(eventually([&] { return trimmer.num_trims() >= 1; }));
  for (size_t i = 1; i < blocks.size(); i += 2) std::free(blocks[i]);
}

// What a CONTINUATION flood does to a gRPC thread, in small: a 30 MiB block freed (glibc
// raises its mmap threshold to 30 MiB, its trim threshold to 60 MiB), then 48 MiB in 1 MiB
// blocks touched and freed on the same thread. Before freeze_malloc_thresholds the 1 MiB
// blocks came from the thread's arena and its 48 MiB free top stayed resident, malloc_trim
// or not; now they are unmapped when freed. Runs last: the thresholds stay frozen.
TEST(HeapTrimmerTest, ThreadArenaGivesAFreedBurstBack) {
  freeze_malloc_thresholds();
  const int64_t before = resident_bytes();
  std::thread([] {
    void* big = std::malloc(30 * kMiB);
    std::memset(big, 1, 30 * kMiB);
    asm volatile("" : : "r"(big) : "memory");  // the pair must reach malloc and free
    std::free(big);
    std::vector<void*> blocks(48);
    for (void*& p : blocks) {
      p = std::malloc(kMiB);
      std::memset(p, 1, kMiB);
    }
    for (void* p : blocks) std::free(p);
  }).join();
  EXPECT_LT(resident_bytes() - before, 8 * kMiB)
      << "kept " << (resident_bytes() - before) / kMiB << " MiB of 48";
}
#endif

}  // namespace
}  // namespace flashserve::api
