#pragma once
// The standard grpc.health.v1.Health service, our own (gRPC's built-in one starts SERVING),
// on the gRPC callback API (no thread per call), and the watcher that drives it.
//
// HealthService
//   Knows the whole server ("") and the service names given at construction; one status for
//   all of them, NOT_SERVING from construction (so before the server listens) until
//   set_serving(true). The liveness name (kLivenessService) is the exception: SERVING from
//   construction until shutdown(), whatever set_serving() says, so that a liveness probe does
//   not restart a server that is loading its model or draining.
//   Check  known name -> OK with the status; unknown name -> NOT_FOUND (gRPC spec).
//   Watch  sends the current status at once and then every change (never the same value
//          twice in a row; a client that reads slowly gets the latest value, intermediate
//          ones may be skipped). Unknown name -> one SERVICE_UNKNOWN message and the stream
//          stays open (spec). A stream ends when the client cancels (CANCELLED) or at
//          shutdown() (UNAVAILABLE, after NOT_SERVING was sent).
//   shutdown()  NOT_SERVING for good (later set_serving() calls are ignored), finishes every
//          open Watch and every later one at once, so grpc::Server::Shutdown does not wait
//          for them. Call it before grpc::Server::Shutdown.
//   Thread-safety: every method may be called from any thread. The service must outlive the
//   grpc::Server it is registered with.
//
// HealthWatcher
//   A small thread that polls `is_serving` every `period` and calls set_serving() when the
//   answer changes.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "server/api/auth.h"
#include "server/engine/engine.h"

namespace flashserve::api {

// SERVING as far as the engine is concerned: its thread runs, it is not draining, it has
// not stalled with work pending, and its model runner has not failed (for good).
inline bool engine_serving(const engine::EngineSnapshot& snapshot) {
  return snapshot.running && !snapshot.stalled && snapshot.failure.ok();
}

struct HealthWatch;

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // The name a liveness probe asks for.
  static constexpr char kLivenessService[] = "liveness";

  // `services`: the names besides "" and kLivenessService that Check/Watch know (e.g.
  // "flashserve.v1.Generation").
  // `auth`: null = open to all; otherwise Check/Watch need a token (UNAUTHENTICATED).
  explicit HealthService(std::vector<std::string> services, const TokenAuth* auth = nullptr);
  ~HealthService() override;

  void set_serving(bool serving);
  void shutdown();  // idempotent
  // A fatal failure (the model runner failed: the device's state is unknown): every name,
  // `liveness` too, is NOT_SERVING from now on, so that an orchestrator restarts the process.
  void fail();
  ServingStatus status() const;  // SERVING or NOT_SERVING (of "" and the named services)

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  friend class HealthWatchCall;
  bool known(const std::string& service) const;
  ServingStatus status_locked(const std::string& service) const;  // REQUIRES: mu_ held
  void forget(const HealthWatch* watch);  // the call is done

  const std::vector<std::string> services_;
  const TokenAuth* const auth_;
  mutable std::mutex mu_;  // taken before any HealthWatch::mu, never after
  bool serving_ = false;        // guarded by mu_
  bool shut_down_ = false;      // guarded by mu_
  bool failed_ = false;         // guarded by mu_
  std::vector<std::shared_ptr<HealthWatch>> watches_;  // open Watch calls; guarded by mu_
};

class HealthWatcher {
 public:
  // `health` must outlive the watcher. Sets NOT_SERVING, then polls.
  HealthWatcher(HealthService* health, std::function<bool()> is_serving,
                std::chrono::milliseconds period);
  ~HealthWatcher();  // stop()
  HealthWatcher(const HealthWatcher&) = delete;
  HealthWatcher& operator=(const HealthWatcher&) = delete;

  // Joins the thread and leaves the status NOT_SERVING. Idempotent.
  void stop();

 private:
  void run();

  HealthService* health_;
  std::function<bool()> is_serving_;
  std::chrono::milliseconds period_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace flashserve::api
