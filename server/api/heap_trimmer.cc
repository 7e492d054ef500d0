#include "server/api/heap_trimmer.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace flashserve::api {

int64_t resident_bytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return -1;
  long long num_pages = 0;
  long long num_resident = -1;
  const int num_read = std::fscanf(statm, "%lld %lld", &num_pages, &num_resident);
  std::fclose(statm);
  if (num_read != 2 || num_resident < 0) return -1;
  return static_cast<int64_t>(num_resident) * ::sysconf(_SC_PAGESIZE);
}

HeapTrimmer::HeapTrimmer(std::chrono::milliseconds period, int64_t threshold_bytes)
    : period_(period), threshold_bytes_(threshold_bytes) {
#if defined(__GLIBC__)
  thread_ = std::thread([this] { run(); });
#endif
}

HeapTrimmer::~HeapTrimmer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t HeapTrimmer::num_trims() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_trims_;
}

void HeapTrimmer::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_cv_.wait_for(lock, period_, [this] { return stop_; })) {
    lock.unlock();
    look();
    lock.lock();
  }
}

void HeapTrimmer::look() {
#if defined(__GLIBC__)
  const int64_t resident = resident_bytes();
  const auto free_bytes = static_cast<int64_t>(mallinfo2().fordblks);
  // Each mark follows its value down, so that what comes back up counts.
  if (resident >= 0 && (resident_mark_ < 0 || resident < resident_mark_)) {
    resident_mark_ = resident;
  }
  if (free_mark_ < 0 || free_bytes < free_mark_) free_mark_ = free_bytes;
  // Quiet: neither moved by 1 MiB since the previous look, three looks in a row.
  constexpr int64_t kQuietBytes = int64_t{1} << 20;
  constexpr int kQuietLooks = 3;
  const bool still = last_resident_ >= 0 && std::abs(resident - last_resident_) < kQuietBytes &&
                     std::abs(free_bytes - last_free_) < kQuietBytes;
  num_quiet_looks_ = still ? num_quiet_looks_ + 1 : 0;
  last_resident_ = resident;
  last_free_ = free_bytes;
  const bool freed = free_bytes - free_mark_ > threshold_bytes_;
  const bool grown = resident - resident_mark_ > threshold_bytes_ && free_bytes > threshold_bytes_;
  const bool idle =
      num_quiet_looks_ >= kQuietLooks && free_bytes - free_mark_ > threshold_bytes_ / 8;
  if (!freed && !grown && !idle) return;
  malloc_trim(0);
  // Trimmed pages stay in the free lists (fordblks): the marks start again from here.
  resident_mark_ = resident_bytes();
  free_mark_ = free_bytes;
  std::lock_guard<std::mutex> lock(mu_);
  ++num_trims_;
#endif
}

}  // namespace flashserve::api
