#pragma once
// The engine's source of time, injected through EngineOptions (as leveldb injects its Env) so
// that deadlines, stall detection and timings can be driven by a test without sleeping.
//
// Thread-safety: now() may be called from any thread.
#include <chrono>

namespace flashserve::engine {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;

  // The process's monotonic clock (std::chrono::steady_clock); lives forever.
  static const Clock& steady();
};

}  // namespace flashserve::engine
