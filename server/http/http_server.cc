#include "server/http/http_server.h"

#include <gnutls/gnutls.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "microhttpd.h"
#include "server/api/prompt.h"
#include "server/api/validation.h"
#include "server/http/body_buffer.h"
#include "server/http/openai_call.h"
#include "server/http/openai_request.h"
#include "server/http/openai_response.h"
#include "server/metrics/metrics.h"

namespace flashserve::http {
namespace {

constexpr char kJson[] = "application/json";

// One HTTP request, from its first header to libmicrohttpd's "completed" callback.
struct Request {
  std::string method;
  std::string url;
  BodyBuffer body;
  int64_t body_reserved = 0;  // bytes of the server's body budget held for this request
  bool answered = false;   // a response was queued
  int status = 0;          // the HTTP status queued
  std::string error;       // the error message answered, for the access line
  bool uploading = false;  // in uploading_ (libmicrohttpd's thread alone reads it)
  std::shared_ptr<GenerationCall> call;  // generation requests once submitted
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

bool is_generation(const std::string& url) {
  return url == "/v1/completions" || url == "/v1/chat/completions";
}

// The listening address for libmicrohttpd.
absl::StatusOr<sockaddr_storage> resolve(const std::string& host, int port, socklen_t* len) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const std::string name = host.size() > 1 && host.front() == '[' && host.back() == ']'
                               ? host.substr(1, host.size() - 2)
                               : host;
  if (getaddrinfo(name.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--host: cannot resolve '", host, "'"));
  }
  sockaddr_storage address = {};
  std::memcpy(&address, found->ai_addr, found->ai_addrlen);
  *len = found->ai_addrlen;
  freeaddrinfo(found);
  return address;
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpOptions& options, HttpContext context)
      : options_(options), context_(std::move(context)) {}
  ~Impl() { stop(std::chrono::milliseconds(0)); }

  absl::Status start();
  void stop(std::chrono::milliseconds grace);

  // libmicrohttpd's callbacks.
  MHD_Result on_request(MHD_Connection* connection, const char* url, const char* method,
                        const char* upload, size_t* upload_size, void** slot);
  void on_completed(MHD_Connection* connection, void** slot, MHD_RequestTerminationCode code);

  HttpOptions options_;
  HttpContext context_;
  std::atomic<const api::Backend*> backend_{nullptr};
  std::atomic<uint64_t> num_responses_{0};  // numbers the response ids
  std::atomic<int64_t> num_body_bytes_{0};   // request bodies held, all connections together
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
  int64_t started_unix_ = absl::ToUnixSeconds(absl::Now());

 private:
  // The first call for a request (headers only): an answer right away, or none to read on.
  MHD_Result on_headers(MHD_Connection* connection, Request* request);
  MHD_Result on_body_piece(MHD_Connection* connection, Request* request, const char* upload,
                           size_t* upload_size);
  // The watcher's look at the uploads (uploading_), under mu_.
  void shut_down_abandoned_uploads();
  // Holds `bytes` more of the budget for request bodies (HttpOptions::max_buffered_body_bytes)
  // for `request`; false, holding nothing more, when that would pass the budget.
  bool reserve_body(Request* request, int64_t bytes);
  // Frees the request's body and gives its part of the budget back.
  void release_body(Request* request);
  MHD_Result dispatch(MHD_Connection* connection, Request* request);
  MHD_Result generate(MHD_Connection* connection, Request* request, Endpoint endpoint);
  MHD_Result answer_stream(MHD_Connection* connection, Request* request);
  MHD_Result answer(MHD_Connection* connection, Request* request, int status,
                    const std::string& body, const char* content_type = kJson);
  // The error in OpenAI's shape, with http_status(status) unless `http` is given.
  MHD_Result answer_error(MHD_Connection* connection, Request* request,
                          const absl::Status& status, int http = 0);
  // OK, or Unauthenticated when the request lacks an accepted token or client certificate.
  absl::Status authorize(MHD_Connection* connection) const;
  // Counts a generation request refused before the engine (not the unauthenticated ones, as
  // gRPC: anyone could move the metrics with them).
  void record_refusal(const absl::Status& status) const;
  void log_access(const Request& request) const;
  absl::Status engine_accepting(const api::Backend& backend) const;
  // The engine's request for a parsed body: the model name, then the gRPC API's validation
  // and prompt building (field names in this API's spelling).
  absl::StatusOr<engine::GenerationRequest> prepare(const api::Backend& backend,
                                                    const OpenAiRequest& parsed) const;

  std::mutex mu_;
  std::condition_variable idle_;
  int num_open_ = 0;                         // GUARDED_BY(mu_): requests not yet completed
  std::set<GenerationCall*> calls_;          // GUARDED_BY(mu_): calls with an open connection
  bool stopped_ = false;                     // GUARDED_BY(mu_)
  // Connections whose first request's headers are not all in yet: their socket and when they
  // opened. The watcher shuts down the socket of one open past the header timeout; an entry
  // leaves before libmicrohttpd closes the socket (the "closed" notification), so the socket
  // shut down is always this connection's.
  struct Opening {
    int fd;
    std::chrono::steady_clock::time_point since;
  };
  std::map<MHD_Connection*, Opening> opening_;  // GUARDED_BY(mu_)
  // Connections receiving a request body: their socket, the body's bytes so far and at the
  // watcher's previous look. libmicrohttpd 0.9.75 (epoll, edge-triggered) misses the end of
  // the stream of a client that leaves mid-upload when it comes with the last bytes: a read
  // shorter than its buffer clears its read-ready flag, and no later edge comes (every time
  // in HttpServerTest.AnUploadAbandonedMidBodyIsClosedAndItsBudgetServesAgain without the
  // watcher; 3 of 128 stalled uploads under CPU load in HttpAbuseE2E): the connection and
  // its share of the body budget then stay until the idle timeout. The watcher peeks at a
  // connection whose body made no progress since its previous look and, at the end of the
  // stream, shuts the socket down, which libmicrohttpd sees (as for the header timeout).
  // Entries leave before libmicrohttpd closes the socket, as above.
  struct Uploading {
    int fd;
    int64_t bytes = 0;
    int64_t bytes_seen = -1;
  };
  std::map<MHD_Connection*, Uploading> uploading_;  // GUARDED_BY(mu_)
  std::condition_variable stop_watcher_;
  // Every kWatchPeriod: GenerationCall::check_disconnect(), and the header timeout.
  std::thread watcher_;

 public:
  // How often requests without events are checked for a client that left.
  static constexpr std::chrono::milliseconds kWatchPeriod{100};
  // False from stop() on: libmicrohttpd's accept policy then closes each new connection at
  // once. (MHD_quiesce_daemon() would keep them in the backlog instead, but libmicrohttpd
  // 0.9.75 aborts the process from it when a worker thread of its pool takes the listening
  // socket out of its epoll set first: "Failed to remove listen FD from epoll set", 1 run in
  // ~900 of HttpServerTest.StopsWithStreamsOpen under CPU load, and CI's failure.)
  std::atomic<bool> accepting_{true};
  void watch_disconnects();
  void on_connection(MHD_Connection* connection, MHD_ConnectionNotificationCode code);
};

namespace {

MHD_Result access_handler(void* cls, MHD_Connection* connection, const char* url,
                          const char* method, const char* /*version*/, const char* upload,
                          size_t* upload_size, void** slot) {
  return static_cast<HttpServer::Impl*>(cls)->on_request(connection, url, method, upload,
                                                          upload_size, slot);
}

void completed_handler(void* cls, MHD_Connection* connection, void** slot,
                       MHD_RequestTerminationCode code) {
  static_cast<HttpServer::Impl*>(cls)->on_completed(connection, slot, code);
}

void connection_handler(void* cls, MHD_Connection* connection, void** /*socket_context*/,
                        MHD_ConnectionNotificationCode code) {
  static_cast<HttpServer::Impl*>(cls)->on_connection(connection, code);
}

MHD_Result accept_policy(void* cls, const sockaddr* /*address*/, socklen_t /*len*/) {
  return static_cast<HttpServer::Impl*>(cls)->accepting_.load() ? MHD_YES : MHD_NO;
}

ssize_t stream_reader(void* cls, uint64_t /*pos*/, char* buf, size_t max) {
  return (*static_cast<std::shared_ptr<GenerationCall>*>(cls))->read(buf, max);
}

// The stream's response holds a reference to its call until libmicrohttpd frees it.
void release_stream(void* cls) { delete static_cast<std::shared_ptr<GenerationCall>*>(cls); }

}  // namespace

// ---- start / stop ------------------------------------------------------------------------------

absl::Status HttpServer::Impl::start() {
  socklen_t address_len = 0;
  absl::StatusOr<sockaddr_storage> address = resolve(options_.host, options_.port, &address_len);
  if (!address.ok()) return address.status();
  unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
  if (address->ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  const bool tls = !options_.tls_cert_pem.empty();
  if (tls) flags |= MHD_USE_TLS;
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_SOCK_ADDR, 0, &*address},
      {MHD_OPTION_THREAD_POOL_SIZE, std::max(1, options_.num_threads), nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, std::max(1, options_.max_connections), nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, std::max(1, options_.idle_timeout_seconds), nullptr},
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<intptr_t>(options_.max_header_bytes),
       nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&completed_handler), this},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&connection_handler), this},
  };
  if (tls) {
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, options_.tls_cert_pem.data()});
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, options_.tls_key_pem.data()});
    if (!options_.tls_client_ca_pem.empty()) {
      items.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0, options_.tls_client_ca_pem.data()});
    }
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  daemon_ = MHD_start_daemon(flags, 0, &accept_policy, this, &access_handler, this,
                             MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  if (daemon_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve HTTP on ", options_.host, ":", options_.port,
        tls ? " (the address is in use, or the TLS certificate/key were refused)"
            : " (the address is in use?)"));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  port_ = info != nullptr ? info->port : options_.port;
  watcher_ = std::thread([this] { watch_disconnects(); });
  return absl::OkStatus();
}

void HttpServer::Impl::watch_disconnects() {
  const std::chrono::seconds header_timeout(std::max(1, options_.header_timeout_seconds));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_watcher_.wait_for(lock, kWatchPeriod, [this] { return stopped_; })) {
    for (GenerationCall* call : calls_) call->check_disconnect();
    // Slowloris: headers trickled (or nothing sent) past the timeout. libmicrohttpd then sees
    // the connection end and closes it.
    const auto opened_before = std::chrono::steady_clock::now() - header_timeout;
    for (auto it = opening_.begin(); it != opening_.end();) {
      if (it->second.since >= opened_before) {
        ++it;
        continue;
      }
      ::shutdown(it->second.fd, SHUT_RDWR);
      it = opening_.erase(it);
    }
    shut_down_abandoned_uploads();
  }
}

void HttpServer::Impl::shut_down_abandoned_uploads() {
  for (auto it = uploading_.begin(); it != uploading_.end();) {
    Uploading& u = it->second;
    char byte = 0;
    // The client's end of the stream with nothing before it: recv() peeks 0 bytes.
    if (u.bytes == u.bytes_seen && ::recv(u.fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
      ::shutdown(u.fd, SHUT_RDWR);
      it = uploading_.erase(it);
      continue;
    }
    u.bytes_seen = u.bytes;
    ++it;
  }
}

void HttpServer::Impl::on_connection(MHD_Connection* connection,
                                     MHD_ConnectionNotificationCode code) {
  std::lock_guard<std::mutex> lock(mu_);
  if (code != MHD_CONNECTION_NOTIFY_STARTED) {
    opening_.erase(connection);
    uploading_.erase(connection);
    return;
  }
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info != nullptr) opening_[connection] = {info->connect_fd, std::chrono::steady_clock::now()};
}

void HttpServer::Impl::stop(std::chrono::milliseconds grace) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopped_ || daemon_ == nullptr) return;
  stopped_ = true;
  stop_watcher_.notify_all();
  accepting_ = false;  // no new connections
  idle_.wait_for(lock, grace, [this] { return num_open_ == 0; });
  // libmicrohttpd must not stop with a suspended connection. After the engine's drain every
  // call has its final event (so none stays suspended for long); release any that still is.
  for (GenerationCall* call : calls_) call->release();
  lock.unlock();
  watcher_.join();
  MHD_stop_daemon(daemon_);
}

// ---- callbacks -----------------------------------------------------------------------------

MHD_Result HttpServer::Impl::on_request(MHD_Connection* connection, const char* url,
                                        const char* method, const char* upload,
                                        size_t* upload_size, void** slot) {
  if (*slot == nullptr) {
    auto* request = new Request();
    request->method = method;
    request->url = url;
    *slot = request;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++num_open_;
      opening_.erase(connection);  // its headers are in: the idle timeout alone from now on
    }
    const MHD_Result result = on_headers(connection, request);
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (result == MHD_YES && !request->answered && info != nullptr) {  // a body may follow
      std::lock_guard<std::mutex> lock(mu_);
      uploading_[connection] = {info->connect_fd};
      request->uploading = true;
    }
    return result;
  }
  auto* request = static_cast<Request*>(*slot);
  if (*upload_size > 0) return on_body_piece(connection, request, upload, upload_size);
  if (request->uploading) {  // the body is all in
    std::lock_guard<std::mutex> lock(mu_);
    uploading_.erase(connection);
    request->uploading = false;
  }
  if (request->call != nullptr) {  // resumed: the final event of a whole completion is here
    if (!request->call->ready_or_suspend()) return MHD_YES;
    const int status = request->call->answer_status();
    return answer(connection, request, status, request->call->answer_body());
  }
  if (request->answered) return MHD_YES;
  const MHD_Result result = dispatch(connection, request);
  release_body(request);  // parsed: the engine's request holds what it needs
  return result;
}

MHD_Result HttpServer::Impl::on_body_piece(MHD_Connection* connection, Request* request,
                                           const char* upload, size_t* upload_size) {
  const size_t size = request->body.size() + *upload_size;
  // Past a limit with the body under way: libmicrohttpd can answer only before the body or
  // after all of it, and reading an endless or stalled body to its end is what an attacker
  // wants, so the connection is closed now, without an answer.
  int refused = 0;  // the status for the access line
  if (size > options_.max_body_bytes) {  // a chunked body: no Content-Length said so before
    refused = 413;
    request->error = absl::StrCat("body: larger than ", options_.max_body_bytes,
                                  " bytes (connection closed)");
  } else if (!reserve_body(request, static_cast<int64_t>(size) - request->body_reserved)) {
    refused = 503;
    request->error = "request bodies held by the server: over their budget (connection closed)";
  }
  if (refused == 0 && !request->body.append(upload, *upload_size)) {
    refused = 503;
    request->error = "body: the system refused the memory for it (connection closed)";
  }
  if (refused != 0) {
    request->status = refused;
    request->answered = true;  // for the access line; nothing more is sent
    return MHD_NO;
  }
  *upload_size = 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = uploading_.find(connection); it != uploading_.end()) {
    it->second.bytes = static_cast<int64_t>(size);
  }
  return MHD_YES;
}

bool HttpServer::Impl::reserve_body(Request* request, int64_t bytes) {
  if (bytes <= 0) return true;
  if (num_body_bytes_.fetch_add(bytes) + bytes > options_.max_buffered_body_bytes) {
    num_body_bytes_.fetch_sub(bytes);
    return false;
  }
  request->body_reserved += bytes;
  return true;
}

void HttpServer::Impl::release_body(Request* request) {
  num_body_bytes_.fetch_sub(request->body_reserved);
  request->body_reserved = 0;
  request->body.release();
}

void HttpServer::Impl::on_completed(MHD_Connection* connection, void** slot,
                                    MHD_RequestTerminationCode /*code*/) {
  auto* request = static_cast<Request*>(*slot);
  if (request == nullptr) return;
  *slot = nullptr;
  if (request->uploading) {
    std::lock_guard<std::mutex> lock(mu_);
    uploading_.erase(connection);
  }
  if (request->call != nullptr) {
    request->call->connection_closed();
    std::lock_guard<std::mutex> lock(mu_);
    calls_.erase(request->call.get());
  }
  log_access(*request);
  release_body(request);
  delete request;
  std::lock_guard<std::mutex> lock(mu_);
  if (--num_open_ == 0) idle_.notify_all();
}

// ---- routing -------------------------------------------------------------------------------

MHD_Result HttpServer::Impl::on_headers(MHD_Connection* connection, Request* request) {
  const std::string& url = request->url;
  // Probes answer without a token or client certificate with --auth-open-health (the default;
  // Kubernetes' HTTP probes can present neither).
  const bool open = context_.open_health && (url == "/health" || url == "/ready");
  if (absl::Status denied = open ? absl::OkStatus() : authorize(connection); !denied.ok()) {
    return answer_error(connection, request, denied);
  }
  const char* length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_CONTENT_LENGTH);
  const uint64_t declared = length != nullptr ? std::strtoull(length, nullptr, 10) : 0;
  if (declared > options_.max_body_bytes) {
    return answer_error(connection, request,
                        absl::ResourceExhaustedError(absl::StrCat(
                            "body: ", length, " bytes, at most ", options_.max_body_bytes)),
                        /*http=*/413);
  }
  // The whole declared body is held from the start: a client that sends it slowly holds it.
  if (!reserve_body(request, static_cast<int64_t>(declared))) {
    return answer_error(connection, request,
                        absl::UnavailableError(
                            "the server holds too many request bodies being received; retry "
                            "shortly"));
  }
  if (!request->body.reserve(declared)) {  // pages are touched only as the body arrives
    return answer_error(connection, request,
                        absl::UnavailableError(absl::StrCat(
                            "body: the system refused ", declared, " bytes for it; retry shortly")));
  }
  return MHD_YES;
}

MHD_Result HttpServer::Impl::dispatch(MHD_Connection* connection, Request* request) {
  const std::string& url = request->url;
  const bool get = request->method == "GET" || request->method == "HEAD";
  const bool post = request->method == "POST";
  if (url == "/health" || url == "/ready") {
    if (!get) return answer_error(connection, request, absl::InvalidArgumentError(
                                      absl::StrCat("method: ", url, " takes GET")), 405);
    const bool ok = url == "/health" ? (!context_.live || context_.live())
                                     : (context_.ready && context_.ready());
    return answer(connection, request, ok ? 200 : 503,
                  ok ? "{\"status\":\"ok\"}" : "{\"status\":\"unavailable\"}");
  }
  if (url == "/v1/models" || absl::StartsWith(url, "/v1/models/")) {
    if (!get) return answer_error(connection, request, absl::InvalidArgumentError(
                                      absl::StrCat("method: ", url, " takes GET")), 405);
    if (url == "/v1/models") {
      return answer(connection, request, 200, models_json(context_.model_name, started_unix_));
    }
    const std::string name = url.substr(std::string_view("/v1/models/").size());
    if (name != context_.model_name) {
      return answer_error(connection, request, absl::NotFoundError(absl::StrCat(
                                                   "model: '", name, "' is not served here")));
    }
    return answer(connection, request, 200, model_json(context_.model_name, started_unix_));
  }
  if (is_generation(url)) {
    if (!post) return answer_error(connection, request, absl::InvalidArgumentError(
                                       absl::StrCat("method: ", url, " takes POST")), 405);
    return generate(connection, request,
                    url == "/v1/completions" ? Endpoint::kCompletions
                                             : Endpoint::kChatCompletions);
  }
  return answer_error(connection, request,
                      absl::NotFoundError(absl::StrCat("no route ", request->method, " ", url)));
}

absl::Status HttpServer::Impl::engine_accepting(const api::Backend& backend) const {
  // As the gRPC service's (server/api/generation_service.cc): a failed runner or a stalled
  // engine refuses at once.
  const engine::EngineSnapshot snapshot = backend.engine->snapshot();
  if (!snapshot.failure.ok()) return snapshot.failure;
  if (snapshot.stalled) {
    return absl::UnavailableError(absl::StrCat(
        "the engine has made no progress for over ",
        absl::FormatDuration(absl::FromChrono(backend.engine_options.stall_threshold)),
        " (stalled); retry later or on another replica"));
  }
  return absl::OkStatus();
}

absl::StatusOr<engine::GenerationRequest> HttpServer::Impl::prepare(
    const api::Backend& backend, const OpenAiRequest& parsed) const {
  if (!parsed.model.empty() && parsed.model != context_.model_name) {
    return absl::NotFoundError(absl::StrCat("model: '", parsed.model,
                                            "' is not served here (GET /v1/models lists '",
                                            context_.model_name, "')"));
  }
  // The gRPC API's own two stages, their field names in this API's spelling.
  if (absl::Status valid = api::validate_generate_request(parsed.request, backend.prompt.limits);
      !valid.ok()) {
    return openai_field_names(valid, parsed);
  }
  absl::StatusOr<engine::GenerationRequest> built =
      api::build_generation_request(parsed.request, backend.prompt, std::nullopt);
  if (!built.ok()) return openai_field_names(built.status(), parsed);
  built->api = metrics::Api::kHttp;
  return built;
}

MHD_Result HttpServer::Impl::generate(MHD_Connection* connection, Request* request,
                                      Endpoint endpoint) {
  const api::Backend* backend = backend_.load(std::memory_order_acquire);
  const absl::Status accepting =
      backend == nullptr ? absl::UnavailableError("the model is still loading; retry shortly")
                         : engine_accepting(*backend);
  if (!accepting.ok()) {
    record_refusal(accepting);
    return answer_error(connection, request, accepting);
  }
  const absl::StatusOr<OpenAiRequest> parsed = parse_openai_request(
      endpoint, absl::string_view(request->body.view().data(), request->body.view().size()));
  absl::StatusOr<engine::GenerationRequest> built =
      parsed.ok() ? prepare(*backend, *parsed) : parsed.status();
  if (!built.ok()) {
    record_refusal(built.status());
    return answer_error(connection, request, built.status());
  }
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  auto call = std::make_shared<GenerationCall>(
      connection, info != nullptr ? info->connect_fd : -1, parsed->stream,
      make_meta(*parsed, ++num_responses_, context_.model_name, backend->prompt.tokenizer));
  if (absl::Status submitted = call->submit(backend->engine, std::move(*built));
      !submitted.ok()) {  // the engine counted the refusal
    return answer_error(connection, request, submitted);
  }
  request->call = call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.insert(call.get());
  }
  if (parsed->stream) return answer_stream(connection, request);
  if (!call->ready_or_suspend()) return MHD_YES;  // answered when resumed
  return answer(connection, request, call->answer_status(), call->answer_body());
}

// ---- answers -------------------------------------------------------------------------------

MHD_Result HttpServer::Impl::answer_stream(MHD_Connection* connection, Request* request) {
  auto* holder = new std::shared_ptr<GenerationCall>(request->call);
  MHD_Response* response = MHD_create_response_from_callback(
      MHD_SIZE_UNKNOWN, 16 << 10, &stream_reader, holder, &release_stream);
  if (response == nullptr) {
    delete holder;
    return MHD_NO;  // out of memory: libmicrohttpd closes the connection
  }
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  const MHD_Result queued = MHD_queue_response(connection, 200, response);
  MHD_destroy_response(response);
  request->answered = true;
  request->status = 200;
  return queued;
}

MHD_Result HttpServer::Impl::answer(MHD_Connection* connection, Request* request, int status,
                                    const std::string& body, const char* content_type) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (status == 401) MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  request->answered = true;
  request->status = status;
  return queued;
}

MHD_Result HttpServer::Impl::answer_error(MHD_Connection* connection, Request* request,
                                          const absl::Status& status, int http) {
  request->error = std::string(status.message());
  const int code = http != 0 ? http : http_status(status);
  return answer(connection, request, code, error_json(status, code));
}

absl::Status HttpServer::Impl::authorize(MHD_Connection* connection) const {
  if (!options_.tls_client_ca_pem.empty()) {
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    unsigned int verdict = 1;
    if (info == nullptr || info->tls_session == nullptr ||
        gnutls_certificate_verify_peers2(static_cast<gnutls_session_t>(info->tls_session),
                                         &verdict) != GNUTLS_E_SUCCESS ||
        verdict != 0) {
      return absl::UnauthenticatedError(
          "this server requires a client certificate signed by its --tls-client-ca");
    }
  }
  if (context_.auth == nullptr) return absl::OkStatus();
  // gRPC's rule: the scheme in any case, one or more spaces before the token.
  const char* header = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_AUTHORIZATION);
  if (header == nullptr || !context_.auth->accepts_authorization(header)) {
    if (context_.metrics != nullptr) context_.metrics->record_auth_failure();
    return absl::UnauthenticatedError(
        "this server requires a valid bearer token in the 'Authorization' header");
  }
  return absl::OkStatus();
}

void HttpServer::Impl::record_refusal(const absl::Status& status) const {
  if (context_.metrics == nullptr || status.code() == absl::StatusCode::kUnauthenticated) return;
  context_.metrics->record_request(metrics::rejected_status(status), metrics::Api::kHttp);
}

void HttpServer::Impl::log_access(const Request& request) const {
  if (context_.logger == nullptr) return;
  const bool probe = request.url == "/health" || request.url == "/ready";
  if (probe && request.status == 200) return;  // probes every few seconds: only failures
  GenerationCall::Outcome outcome;
  engine::RequestId id = 0;
  if (request.call != nullptr) {
    outcome = request.call->outcome();
    id = request.call->id();
  }
  const std::string_view finish =
      outcome.client_gone ? "client_disconnected"
      : outcome.finished  ? engine::finish_reason_name(outcome.finish_reason)
                          : "none";
  const std::string error = outcome.client_gone      ? "the client disconnected"
                            : !request.error.empty() ? request.error
                                                     : std::string(outcome.error.message());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - request.start).count();
  // 499 (nginx's "client closed request"): the client left before the answer was complete.
  const int status = outcome.client_gone || !request.answered ? 499 : request.status;
  context_.logger->log(status >= 500 ? api::LogLevel::kError : api::LogLevel::kInfo, "access",
                       {{"api", "http"},
                        {"method", std::string_view(request.method)},
                        {"path", std::string_view(request.url)},
                        {"status", static_cast<int64_t>(status)},
                        {"request_id", static_cast<int64_t>(id)},
                        {"finish_reason", finish},
                        {"prompt_tokens", static_cast<int64_t>(outcome.usage.prompt_tokens)},
                        {"completion_tokens",
                         static_cast<int64_t>(outcome.usage.completion_tokens)},
                        {"queue_seconds", outcome.timings.queue_seconds},
                        {"ttft_seconds", outcome.timings.time_to_first_token},
                        {"total_seconds", seconds},
                        {"error", std::string_view(error)}});
}

// ---- HttpServer ----------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(const HttpOptions& options,
                                                              HttpContext context) {
  auto impl = std::make_unique<Impl>(options, std::move(context));
  if (absl::Status started = impl->start(); !started.ok()) return started;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

void HttpServer::set_backend(const api::Backend* backend) {
  impl_->backend_.store(backend, std::memory_order_release);
}

void HttpServer::stop(std::chrono::milliseconds grace) { impl_->stop(grace); }

int HttpServer::port() const { return impl_->port_; }

}  // namespace flashserve::http
