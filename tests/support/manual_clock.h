#pragma once
// A clock for tests that moves only when told: deadlines and stalls without sleeping.
#include <atomic>
#include <chrono>

#include "server/engine/clock.h"

namespace flashserve::testing {

class ManualClock final : public engine::Clock {
 public:
  // Starts at the steady clock's now, so it can be compared with real deadlines too.
  ManualClock() : ns_(std::chrono::steady_clock::now().time_since_epoch().count()) {}
  TimePoint now() const override { return TimePoint(TimePoint::duration(ns_.load())); }
  void advance(std::chrono::nanoseconds d) {
    ns_ += std::chrono::duration_cast<TimePoint::duration>(d).count();
  }

 private:
  std::atomic<TimePoint::rep> ns_;
};

}  // namespace flashserve::testing
