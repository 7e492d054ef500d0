#pragma once
// The flashserve server: wires model loading, the engine, metrics and the gRPC services.
//
// Life cycle (server/server_main.h runs it for every server binary):
//   start()       binds the metrics HTTP port, the gRPC port and the OpenAI HTTP API's port
//                 (server/http) and starts serving at once: health NOT_SERVING (HTTP /ready
//                 503), Generation answers UNAVAILABLE ("model is loading"), reflection and
//                 health work — so orchestrators can watch the start-up.
//   serve()       takes the model the caller loaded (flashserve: the GGUF loader; the
//                 benches and tests: models they build), starts the engine thread over it and
//                 publishes it to the service; health turns SERVING once the engine runs and
//                 is not stalled.
//   shutdown()    NOT_SERVING, the engine drains (new requests UNAVAILABLE, admitted ones
//                 finish), then the gRPC server shuts down and waits for in-flight calls.
#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/model_loader.h"
#include "server/api/server_options.h"

namespace flashserve::api {

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> start(const ServerOptions& options);
  ~Server();  // shutdown() if not done
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Starts the engine over `model` and publishes it. Call once.
  void serve(model::LoadedModel model);
  // Graceful stop, bounded by options.drain_timeout: NOT_SERVING, admitted work may finish
  // until then, what remains then fails with UNAVAILABLE ("drain limit ... passed"), and the
  // gRPC server gets a short moment to deliver those statuses. Idempotent.
  void shutdown();

  // Re-reads --auth-token-file (SIGHUP). On error the tokens in use stay. FailedPrecondition
  // without token auth.
  absl::Status reload_auth_tokens();

  int grpc_port() const;
  int metrics_port() const;  // 0 when metrics are off
  int http_port() const;     // the OpenAI HTTP API's; 0 when it is off
  // One line: "SmolLM2 135M (llama, 30 layers, ...) on cpu, KV cache N blocks x 16 tokens".
  std::string model_summary() const;

 private:
  class Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The default model name of a model path: its file name without a ".gguf" suffix
// ("models/SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct.Q4_1").
std::string default_model_name(const std::string& model_path);

}  // namespace flashserve::api
