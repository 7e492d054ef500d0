#include "model/cpu/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace flashserve::model {
namespace {

// Spins ~50 us before sleeping: longer than the gap between two products of a decode step,
// far shorter than a step's scheduling and sampling (bench/cpu/NOTES.md).
constexpr int kSpinIterations = 2000;

void pause() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { work_loop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::claim_and_run() {
  uint64_t s = state_.load(std::memory_order_acquire);
  while (true) {
    const Slot& slot = slots_[(s >> 32) % kNumSlots];
    const uint32_t task = static_cast<uint32_t>(s);
    if (task >= static_cast<uint32_t>(slot.num_tasks.load(std::memory_order_relaxed))) return;
    void (*fn)(void*, int) = slot.fn.load(std::memory_order_relaxed);
    void* ctx = slot.ctx.load(std::memory_order_relaxed);
    // Succeeds only while this run is current: then the slot read above is this run's.
    if (!state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel)) continue;
    fn(ctx, static_cast<int>(task));
    slots_[(s >> 32) % kNumSlots].num_done.fetch_add(1, std::memory_order_release);
    s = state_.load(std::memory_order_acquire);
  }
}

void ThreadPool::work_loop() {
  uint32_t seen = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    uint32_t w = wake_.load(std::memory_order_acquire);
    for (int spin = 0; w == seen && spin < kSpinIterations; ++spin) {
      pause();
      w = wake_.load(std::memory_order_acquire);
    }
    if (w == seen) {
      wake_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = w;
    claim_and_run();
  }
}

void ThreadPool::run_tasks(int num_tasks, void (*fn)(void*, int), void* ctx) {
  if (workers_.empty() || num_tasks <= 1) {
    for (int i = 0; i < num_tasks; ++i) fn(ctx, i);
    return;
  }
  ++run_number_;
  Slot& slot = slots_[run_number_ % kNumSlots];
  slot.fn.store(fn, std::memory_order_relaxed);
  slot.ctx.store(ctx, std::memory_order_relaxed);
  slot.num_tasks.store(num_tasks, std::memory_order_relaxed);
  slot.num_done.store(0, std::memory_order_relaxed);
  state_.store(uint64_t{run_number_} << 32, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_all();
  claim_and_run();
  while (slot.num_done.load(std::memory_order_acquire) < num_tasks) pause();
}

}  // namespace flashserve::model
