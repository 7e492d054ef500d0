#pragma once
// A one-shot event for tests, on std::mutex/std::condition_variable so that ThreadSanitizer
// sees the hand-off (absl::Notification lives in Debian's uninstrumented Abseil; TSan would
// report every access it orders as a race).
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace flashserve::testing {

class Notification {
 public:
  void notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      notified_ = true;
    }
    cv_.notify_all();
  }
  bool notified() const {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  void wait() const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
  }
  // True when notified within `timeout`.
  bool wait_for(std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ = false;  // guarded by mu_
};

}  // namespace flashserve::testing
