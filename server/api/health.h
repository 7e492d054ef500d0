#pragma once
// Keeps the standard grpc.health.v1 status (gRPC's built-in HealthCheckService) in step with
// the server: a small thread polls `is_serving` every `period` and sets SERVING/NOT_SERVING
// for the whole server ("") and for each named service whenever the answer changes.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grpcpp/health_check_service_interface.h"
#include "server/engine/engine.h"

namespace flashserve::api {

// SERVING as far as the engine is concerned: its thread runs, it is not draining, and it has
// not stalled with work pending.
inline bool engine_serving(const engine::EngineSnapshot& snapshot) {
  return snapshot.running && !snapshot.stalled;
}

class HealthWatcher {
 public:
  // `health` must outlive the watcher. Starts NOT_SERVING.
  HealthWatcher(grpc::HealthCheckServiceInterface* health, std::vector<std::string> services,
                std::function<bool()> is_serving, std::chrono::milliseconds period);
  ~HealthWatcher();  // stop()
  HealthWatcher(const HealthWatcher&) = delete;
  HealthWatcher& operator=(const HealthWatcher&) = delete;

  // Joins the thread and leaves every service NOT_SERVING. Idempotent.
  void stop();

 private:
  void set(bool serving);
  void run();

  grpc::HealthCheckServiceInterface* health_;
  std::vector<std::string> services_;
  std::function<bool()> is_serving_;
  std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace flashserve::api
