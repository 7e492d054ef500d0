#include "server/api/health.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace flashserve::api {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthWatchCall;

// One Watch call's state, shared by its reactor (gRPC threads) and the service (whoever calls
// set_serving/shutdown). As in generation_calls.cc, StartWrite/Finish are issued after
// releasing `mu`, by the one thread that changed `writing`/`finished` under it; the reactor is
// never touched after `finished`.
struct HealthWatch {
  std::mutex mu;
  HealthWatchCall* call = nullptr;  // valid until `finished`
  bool known = false;               // a service the server knows; else SERVICE_UNKNOWN
  bool liveness = false;            // the liveness name: changes only at shutdown
  HealthService::ServingStatus latest = HealthCheckResponse::UNKNOWN;  // to be sent
  HealthService::ServingStatus sent = HealthCheckResponse::UNKNOWN;
  bool have_sent = false;
  HealthCheckResponse out;  // the message being written
  bool writing = false;      // a StartWrite is in flight
  bool finished = false;     // Finish has been issued
  bool client_gone = false;  // OnCancel, or a write failed
  bool closing = false;      // server shutdown: finish once `latest` is written

  // Writes `latest` if the client has not seen it, or finishes; no-op while a write is in
  // flight (OnWriteDone pumps again). Consumes the lock.
  void pump(std::unique_lock<std::mutex> lock);
};

// A Watch refused before it starts (no valid token): finishes at once.
class RejectedWatch final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  explicit RejectedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

class HealthWatchCall final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  HealthWatchCall(HealthService* service, std::shared_ptr<HealthWatch> watch)
      : service_(service), watch_(std::move(watch)) {
    watch_->call = this;
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(watch_->mu);
    watch_->writing = false;
    if (!ok) watch_->client_gone = true;
    watch_->pump(std::move(lock));
  }
  void OnCancel() override {
    std::unique_lock<std::mutex> lock(watch_->mu);
    watch_->client_gone = true;
    watch_->pump(std::move(lock));
  }
  void OnDone() override {
    service_->forget(watch_.get());
    delete this;
  }

 private:
  HealthService* const service_;
  const std::shared_ptr<HealthWatch> watch_;
};

void HealthWatch::pump(std::unique_lock<std::mutex> lock) {
  if (finished || writing) return;
  if (client_gone) {
    finished = true;
    lock.unlock();
    call->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"));
    return;
  }
  if (!have_sent || sent != latest) {
    out.set_status(latest);
    sent = latest;
    have_sent = true;
    writing = true;
    lock.unlock();
    call->StartWrite(&out);
    return;
  }
  if (closing) {
    finished = true;
    lock.unlock();
    call->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down"));
  }
}

// ---- HealthService --------------------------------------------------------------------------

HealthService::HealthService(std::vector<std::string> services, const TokenAuth* auth)
    : services_(std::move(services)), auth_(auth) {}

HealthService::~HealthService() = default;

bool HealthService::known(const std::string& service) const {
  return service.empty() || service == kLivenessService ||
         std::find(services_.begin(), services_.end(), service) != services_.end();
}

HealthService::ServingStatus HealthService::status_locked(const std::string& service) const {
  const bool up = service == kLivenessService ? !shut_down_ && !failed_ : serving_ && !failed_;
  return up ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

HealthService::ServingStatus HealthService::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_locked("");
}

void HealthService::set_serving(bool serving) {
  std::vector<std::shared_ptr<HealthWatch>> to_pump;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_ || failed_ || serving_ == serving) return;
    serving_ = serving;
    for (const std::shared_ptr<HealthWatch>& watch : watches_) {
      if (!watch->known || watch->liveness) continue;
      std::lock_guard<std::mutex> watch_lock(watch->mu);
      watch->latest = serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
      to_pump.push_back(watch);
    }
  }
  for (const std::shared_ptr<HealthWatch>& watch : to_pump) {
    watch->pump(std::unique_lock<std::mutex>(watch->mu));
  }
}

void HealthService::fail() {
  std::vector<std::shared_ptr<HealthWatch>> to_pump;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_ || shut_down_) return;
    failed_ = true;
    serving_ = false;
    for (const std::shared_ptr<HealthWatch>& watch : watches_) {
      if (!watch->known) continue;
      std::lock_guard<std::mutex> watch_lock(watch->mu);
      watch->latest = HealthCheckResponse::NOT_SERVING;
      to_pump.push_back(watch);
    }
  }
  for (const std::shared_ptr<HealthWatch>& watch : to_pump) {
    watch->pump(std::unique_lock<std::mutex>(watch->mu));
  }
}

void HealthService::shutdown() {
  std::vector<std::shared_ptr<HealthWatch>> to_pump;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    serving_ = false;
    for (const std::shared_ptr<HealthWatch>& watch : watches_) {
      std::lock_guard<std::mutex> watch_lock(watch->mu);
      if (watch->known) watch->latest = HealthCheckResponse::NOT_SERVING;
      watch->closing = true;
    }
    to_pump = watches_;
  }
  for (const std::shared_ptr<HealthWatch>& watch : to_pump) {
    watch->pump(std::unique_lock<std::mutex>(watch->mu));
  }
}

void HealthService::forget(const HealthWatch* watch) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(watches_.begin(), watches_.end(),
                         [watch](const auto& w) { return w.get() == watch; });
  if (it != watches_.end()) watches_.erase(it);
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (auth_ != nullptr) {
    if (grpc::Status denied = auth_->check(*context); !denied.ok()) {
      reactor->Finish(denied);
      return reactor;
    }
  }
  if (!known(request->service())) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("grpc.health.v1.Health: unknown service '", request->service(),
                     "' (known: '', '", kLivenessService, "', '",
                     absl::StrJoin(services_, "', '"), "')")));
    return reactor;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    response->set_status(status_locked(request->service()));
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request) {
  if (auth_ != nullptr) {
    if (grpc::Status denied = auth_->check(*context); !denied.ok()) {
      return new RejectedWatch(denied);
    }
  }
  auto watch = std::make_shared<HealthWatch>();
  auto* call = new HealthWatchCall(this, watch);
  watch->known = known(request->service());
  watch->liveness = request->service() == kLivenessService;
  {
    // Registered and given the current status under mu_: no change is missed.
    std::lock_guard<std::mutex> lock(mu_);
    watch->latest = !watch->known ? HealthCheckResponse::SERVICE_UNKNOWN
                                  : status_locked(request->service());
    watch->closing = shut_down_;
    watches_.push_back(watch);
  }
  watch->pump(std::unique_lock<std::mutex>(watch->mu));  // the current status at once
  return call;
}

// ---- HealthWatcher --------------------------------------------------------------------------

HealthWatcher::HealthWatcher(HealthService* health, std::function<bool()> is_serving,
                             std::chrono::milliseconds period)
    : health_(health), is_serving_(std::move(is_serving)), period_(period) {
  health_->set_serving(false);
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
  health_->set_serving(false);
}

void HealthWatcher::run() {
  bool serving = false;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    const bool now_serving = is_serving_();
    if (now_serving != serving) {
      serving = now_serving;
      health_->set_serving(serving);
    }
    lock.lock();
    cv_.wait_for(lock, period_, [this] { return stopping_; });
  }
}

}  // namespace flashserve::api
