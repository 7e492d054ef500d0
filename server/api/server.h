#pragma once
// The flashserve server: wires model loading, the engine, metrics and the gRPC services.
//
// Life cycle (main.cc):
//   start()       binds the metrics HTTP port and the gRPC port and starts serving at once:
//                 health NOT_SERVING, Generation answers UNAVAILABLE ("model is loading"),
//                 reflection and health work — so orchestrators can watch the start-up.
//   load_model()  loads the model, starts the engine thread and publishes it to the service;
//                 health turns SERVING once the engine runs and is not stalled.
//   shutdown()    NOT_SERVING, the engine drains (new requests UNAVAILABLE, admitted ones
//                 finish), then the gRPC server shuts down and waits for in-flight calls.
#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/api/log.h"
#include "server/api/validation.h"
#include "server/engine/engine.h"

namespace flashserve::api {

struct ServerOptions {
  std::string model_path;
  // The `model` label of every metric; empty = the model file's name without ".gguf".
  std::string model_name;
  std::string device = "auto";  // auto | cpu | cuda
  std::string host = "0.0.0.0";
  int port = 50051;             // 0 = any free port (see grpc_port())
  int metrics_port = 9464;      // 0 = any free port; -1 = no metrics HTTP server
  engine::EngineOptions engine;
  int kv_cache_mb = 0;          // KV cache size in MiB; 0 = the loader's default
  int64_t kv_cache_tokens = 0;  // KV cache size in tokens (overrides kv_cache_mb); 0 = unset
  double gpu_memory_fraction = 0.9;  // CUDA backend: device memory weights + cache may fill
  int num_threads = 0;          // CPU backend threads; 0 = library default
  RequestLimits limits;         // policy part; context/vocab are filled from the model
  // Receives the access lines (one per generation call); null = none. Must outlive the server.
  const Logger* logger = nullptr;
  // How often the health watcher re-evaluates SERVING.
  std::chrono::milliseconds health_period{100};
};

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> start(const ServerOptions& options);
  ~Server();  // shutdown() if not done
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Blocking. InvalidArgument/NotFound/Unimplemented etc. from the loader, or for a bad
  // --device. Call once.
  absl::Status load_model();
  // Graceful stop; `grace` bounds how long in-flight calls may take after the engine drained.
  void shutdown(std::chrono::milliseconds grace);

  int grpc_port() const;
  int metrics_port() const;  // 0 when metrics are off
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
