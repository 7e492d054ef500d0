#include "server/api/health.h"

namespace flashserve::api {

HealthWatcher::HealthWatcher(grpc::HealthCheckServiceInterface* health,
                             std::vector<std::string> services,
                             std::function<bool()> is_serving,
                             std::chrono::milliseconds period)
    : health_(health),
      services_(std::move(services)),
      is_serving_(std::move(is_serving)),
      period_(period) {
  set(false);
  thread_ = std::thread([this] { run(); });
}

HealthWatcher::~HealthWatcher() { stop(); }

void HealthWatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  set(false);
}

void HealthWatcher::set(bool serving) {
  health_->SetServingStatus(serving);  // "" and every registered service
  for (const std::string& service : services_) health_->SetServingStatus(service, serving);
}

void HealthWatcher::run() {
  bool serving = false;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const bool now_serving = is_serving_();
    if (now_serving != serving) {
      serving = now_serving;
      set(serving);
    }
    lock.lock();
    cv_.wait_for(lock, period_, [this] { return stopping_; });
  }
}

}  // namespace flashserve::api
