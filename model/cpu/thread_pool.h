#pragma once
// A persistent pool for the CPU forward pass: run(num_tasks, f) calls f(0) .. f(num_tasks - 1)
// on the calling thread and num_threads - 1 workers, and returns when all are done. Workers
// stay alive between calls, spin briefly (a decode step's products follow each other within
// microseconds), then sleep on an atomic wait, so that an idle server takes no CPU.
//
// Tasks are claimed one at a time from a counter tagged with the run's number, so the caller
// never waits for a worker that was not scheduled in time (a busy machine): it runs the
// unclaimed tasks itself and waits only for tasks already being run; a worker that wakes up
// late finds the run's counter exhausted (or a newer run) and claims nothing of the old one.
//
// Thread-safety: run() is called by one thread at a time (the runner's caller, the engine).
#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace flashserve::model {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // >= 1; 1 runs everything on the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  template <typename F>
  void run(int num_tasks, F&& f) {
    run_tasks(num_tasks,
              [](void* ctx, int i) { (*static_cast<std::remove_reference_t<F>*>(ctx))(i); },
              const_cast<void*>(static_cast<const void*>(&f)));
  }

 private:
  // What one run() asks; slot (run number % kNumSlots) is rewritten only kNumSlots runs
  // later, after every task of the runs between has finished.
  struct Slot {
    std::atomic<void (*)(void*, int)> fn{nullptr};
    std::atomic<void*> ctx{nullptr};
    std::atomic<int> num_tasks{0};
    std::atomic<int> num_done{0};
  };
  static constexpr int kNumSlots = 4;

  void run_tasks(int num_tasks, void (*fn)(void*, int), void* ctx);
  void work_loop();
  void claim_and_run();  // runs tasks of the current run until none is left unclaimed

  std::vector<std::thread> workers_;
  Slot slots_[kNumSlots];
  std::atomic<uint64_t> state_{0};     // run number << 32 | next unclaimed task
  std::atomic<uint32_t> wake_{0};      // bumped for each run() and at shutdown
  std::atomic<bool> stop_{false};
  uint32_t run_number_ = 0;            // the caller's
};

}  // namespace flashserve::model
