#include "server/engine/event_delivery.h"

namespace flashserve::engine {

EventDelivery::EventDelivery() : thread_([this] { run(); }) {}

EventDelivery::~EventDelivery() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // run() drains the queue before it returns
}

void EventDelivery::post(Batch* batch) {
  if (batch->empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(*batch));
    ++num_posted_;
    if (!spare_.empty()) {
      *batch = std::move(spare_.back());
      spare_.pop_back();
    }
  }
  batch->clear();  // moved from, or a spare (empty already)
  cv_.notify_all();
}

void EventDelivery::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = num_posted_;
  cv_.wait(lock, [&] { return num_delivered_ >= target; });
}

void EventDelivery::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Batch batch = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    for (auto& [sink, event] : batch) (*sink)(std::move(event));
    batch.clear();  // sinks (and what they hold) are released off the lock
    lock.lock();
    if (spare_.size() < 2) spare_.push_back(std::move(batch));
    ++num_delivered_;
    cv_.notify_all();
  }
}

}  // namespace flashserve::engine
