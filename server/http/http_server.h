#pragma once
// The OpenAI-compatible HTTP API (docs/api.md "HTTP API"), served by the same process, engine,
// TLS certificate, tokens and metrics as gRPC, on libmicrohttpd (docs/design.md says why).
//
//   GET  /health                liveness: 200 unless the model runner failed for good
//   GET  /ready                 readiness: 200 while the engine serves (as gRPC health)
//   GET  /v1/models             the one model served
//   POST /v1/completions        prompt (text or token ids) -> text
//   POST /v1/chat/completions   messages, rendered with the model's chat template
//
// Requests go through openai_request.h (JSON -> v1::GenerateRequest) and then the gRPC API's
// own validation and prompt building (server/api/validation.h, prompt.h); errors are OpenAI's
// JSON shape (openai_response.h). `stream: true` answers with server-sent events.
//
// Threads and flow control. libmicrohttpd runs `num_threads` event-loop threads (epoll), not
// one per connection: a request that waits for the engine is a suspended connection, resumed
// by the engine's event sink; a stream whose client reads slowly just keeps its events queued
// (the engine never waits for a client). The engine's sink also checks whether the client has
// closed its connection, so a disconnect cancels the request at the next engine step.
//
// Life cycle: start() binds the port and answers at once (503 "model is loading" until
// set_backend()); stop() (after the engine drained, so every request has its final event)
// closes each new connection at once, gives open responses `grace` to finish, then closes
// what remains.
// Thread-safety: set_backend() and stop() from the owner's thread; everything else internal.
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/api/auth.h"
#include "server/api/generation_service.h"
#include "server/api/log.h"

namespace flashserve::metrics {
class Metrics;
}

namespace flashserve::http {

struct HttpOptions {
  std::string host = "0.0.0.0";
  int port = 8000;  // 0 = any free port (port() says which)
  // PEM texts; empty cert = plain HTTP. With a client CA, clients must present a certificate
  // it signed (as gRPC's --tls-client-ca).
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string tls_client_ca_pem;
  // A body past this gets 413: the same bound as gRPC's message size (2 MiB: 1 MiB of text,
  // RequestLimits::max_input_bytes, plus the JSON around it).
  size_t max_body_bytes = 2 << 20;
  // Request bodies being received, all connections together (a body with a Content-Length
  // holds all of it from its headers on). Past it a request gets 503 at its headers, or its
  // connection closed mid-body; without it 4096 connections could hold 8 GiB of bodies.
  int64_t max_buffered_body_bytes = int64_t{256} << 20;
  // Request line + headers past this get 431 (libmicrohttpd's per-connection memory pool).
  size_t max_header_bytes = 32 << 10;
  int max_connections = 4096;  // open at once; then new connections are refused
  int num_threads = 2;         // event-loop threads
  int idle_timeout_seconds = 60;  // a connection silent this long is closed (not while waiting)
  // From its opening until its first request's headers are all in, a connection may take this
  // long; then it is closed (slowloris: a connection that never sends, or trickles its
  // headers, holds one of max_connections).
  int header_timeout_seconds = 10;
};

// What the handlers need besides the model. Pointers may be null where noted and must outlive
// the server.
struct HttpContext {
  const api::TokenAuth* auth = nullptr;  // null = no token auth
  // /health and /ready answer without a token or client certificate.
  bool open_health = true;
  metrics::Metrics* metrics = nullptr;   // null = no metrics
  const api::Logger* logger = nullptr;   // null = no access lines
  std::string model_name;                // the `model` that requests may name
  std::function<bool()> ready;           // GET /ready
  std::function<bool()> live;            // GET /health
};

class HttpServer {
 public:
  // Unavailable when the address cannot be bound; InvalidArgument for a TLS key/cert pair
  // libmicrohttpd refuses.
  static absl::StatusOr<std::unique_ptr<HttpServer>> start(const HttpOptions& options,
                                                           HttpContext context);
  ~HttpServer();  // stop() if not done
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Publishes the loaded model; `backend` must outlive the server.
  void set_backend(const api::Backend* backend);
  void stop(std::chrono::milliseconds grace);
  int port() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve::http
