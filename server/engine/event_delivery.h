#pragma once
// Hands the engine's events to their sinks on a thread of its own.
//
// A sink is the transport's callback (server/api: serialise one response message and start
// its gRPC write). Run on the engine thread, 256 of them cost ~2.4 ms after every step on
// the build machine (bench/serving/NOTES.md, canned server) while the GPU sat idle; here they
// run while the engine schedules and runs the next step.
//
// Contract: events are delivered in the order posted (so each request's events stay in
// order, its final event last), each exactly once, by one thread; flush() returns once
// everything posted before it has been delivered; the destructor flushes, then joins.
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "server/engine/engine.h"

namespace flashserve::engine {

class EventDelivery {
 public:
  using Batch = std::vector<std::pair<std::shared_ptr<EventSink>, GenerationEvent>>;

  EventDelivery();
  ~EventDelivery();
  EventDelivery(const EventDelivery&) = delete;
  EventDelivery& operator=(const EventDelivery&) = delete;

  // Queues the batch and returns at once; *batch is left empty, with the capacity of a batch
  // already delivered when there is one (a 256-stream step's events would otherwise grow a
  // fresh vector every step: bench/serving/NOTES.md step 29).
  void post(Batch* batch);
  // Blocks until every batch posted before this call has been delivered.
  void flush();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;   // guarded by mu_
  std::vector<Batch> spare_;  // delivered and cleared, for post() to hand back; guarded by mu_
  uint64_t num_posted_ = 0;     // guarded by mu_
  uint64_t num_delivered_ = 0;  // guarded by mu_
  bool stop_ = false;           // guarded by mu_
  std::thread thread_;
};

}  // namespace flashserve::engine
