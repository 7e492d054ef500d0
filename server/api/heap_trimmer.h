#pragma once
// Gives heap memory that the C library holds free back to the system.
//
// glibc's malloc keeps freed memory in its arenas; it returns the top of a heap on its own but
// not free chunks below memory still in use. A burst of small, short-lived allocations (HTTP/2
// rapid reset: ~20 KB of gRPC call state per stream opened and reset, ~400 MB for 20,000
// streams on one connection) is freed once gRPC has cleaned up, yet the resident memory stays
// where the burst left it. malloc_trim(0) releases those free pages (madvise) without moving
// anything.
//
// A thread looks every `period` at the resident size and at the bytes free in the arenas
// (mallinfo2; a walk of the free lists, short while little is free), each against a mark that
// follows it down. It trims when the free bytes have grown by more than `threshold_bytes` (a
// burst was freed), or when the resident size has grown by as much while more than
// `threshold_bytes` lie free (a burst freed between two looks, or re-touched trimmed pages);
// after a trim both marks start again from there. Below the threshold, once the process is
// quiet (resident and free bytes each moved less than 1 MiB over the last three looks), it
// trims when more than an eighth of the threshold has been freed past the free mark: a burst
// smaller than the threshold, or the rest of one freed after a trim, does not stay resident
// for as long as the process idles. Growth in use (a KV cache being touched) trims nothing.
// Without glibc it does nothing.
//
// Thread-safety: constructed and destroyed by one owner; the thread is internal.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace flashserve::api {

class HeapTrimmer {
 public:
  HeapTrimmer(std::chrono::milliseconds period, int64_t threshold_bytes);
  ~HeapTrimmer();  // stops the thread
  HeapTrimmer(const HeapTrimmer&) = delete;
  HeapTrimmer& operator=(const HeapTrimmer&) = delete;

  int64_t num_trims() const;

 private:
  void run();
  void look();  // one period's check (on the thread)

  const std::chrono::milliseconds period_;
  const int64_t threshold_bytes_;
  int64_t resident_mark_ = -1;  // the thread's own
  int64_t free_mark_ = -1;      // the thread's own
  int64_t last_resident_ = -1;  // the previous look's (the thread's own)
  int64_t last_free_ = -1;      // the previous look's (the thread's own)
  int num_quiet_looks_ = 0;     // looks in a row with both within 1 MiB (the thread's own)
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;       // guarded by mu_
  int64_t num_trims_ = 0;   // guarded by mu_
  std::thread thread_;
};

// The resident size of this process in bytes (/proc/self/statm); -1 if unreadable.
int64_t resident_bytes();

}  // namespace flashserve::api
