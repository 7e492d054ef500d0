#pragma once
// What the server is started with (server/server_main.cc fills it from flags) and the check
// that refuses, before anything starts, options that would leave the server unable to serve.
#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/command_line.h"
#include "model/model_loader.h"
#include "server/api/log.h"
#include "server/api/validation.h"
#include "server/engine/engine.h"

namespace flashserve::api {

struct TlsOptions {
  std::string cert_path;       // PEM certificate chain; empty = plaintext gRPC
  std::string key_path;        // PEM private key of cert_path
  std::string client_ca_path;  // PEM CA bundle: when set, clients must present a cert it signed
};

struct AuthOptions {
  std::string token_file;      // one token per line ('#' comments); empty = no token auth
  bool open_health = true;     // grpc.health.v1.Health answers without a token (probes)
  bool open_reflection = false;  // server reflection answers without a token
};

// Deliberate gRPC transport limits (docs/api.md "Limits").
struct TransportLimits {
  // A GenerateRequest holds at most 1 MiB of text (RequestLimits::max_input_bytes) plus small
  // fields; 2 MiB leaves room for that and refuses anything larger with RESOURCE_EXHAUSTED.
  int max_receive_message_bytes = 2 << 20;
  // Concurrent calls (HTTP/2 streams) per client connection; further calls wait client-side.
  // 1024: one client may keep a whole batch in flight (--max-num-seqs up to 256 running plus
  // waiting requests); a smaller bound made 256 streams on one connection run as 128.
  int max_concurrent_streams = 1024;
  // Keepalive: the server pings an idle connection every `keepalive_time` and drops it when
  // no answer comes within `keepalive_timeout` (a killed client's calls are then cancelled).
  std::chrono::milliseconds keepalive_time{60000};
  std::chrono::milliseconds keepalive_timeout{20000};
  // Clients may ping at most this often without data; two faster pings close the connection
  // (GOAWAY "too_many_pings").
  std::chrono::milliseconds min_client_ping_interval{10000};
  // gRPC's own memory (call arenas, transport buffers) across all connections; under pressure
  // gRPC refuses new streams instead of growing (HTTP/2 rapid reset: a stream opened and
  // reset at once still costs its call state until gRPC has cleaned it up).
  int64_t grpc_memory_quota_bytes = int64_t{256} << 20;
};

struct ServerOptions {
  std::string model_path;
  // The `model` label of every metric; empty = the model file's name without ".gguf".
  std::string model_name;
  std::string device = "auto";  // auto | cpu | cuda
  std::string weights = "auto";  // auto | native | bf16: the CUDA backend's device weights
  std::string host = "0.0.0.0";
  int port = 50051;             // 0 = any free port (see grpc_port())
  int metrics_port = 9464;      // 0 = any free port; -1 = no metrics HTTP server
  int http_port = 8000;         // the OpenAI HTTP API (server/http); 0 = any free port; -1 = off
  engine::EngineOptions engine;
  int kv_cache_mb = 0;          // KV cache size in MiB; 0 = the loader's default
  int64_t kv_cache_tokens = 0;  // KV cache size in tokens (overrides kv_cache_mb); 0 = unset
  bool cuda_graphs = true;  // CUDA backend: decode steps through CUDA graphs
  double gpu_memory_fraction = 0.9;  // CUDA backend: device memory weights + cache may fill
  int num_threads = 0;          // CPU backend threads; 0 = library default
  RequestLimits limits;         // policy part; context/vocab are filled from the model
  // Every line the server logs (start-up, access lines, errors, protobuf's parse messages);
  // null = default_logger() (text on stderr). Must outlive the server.
  const Logger* logger = nullptr;
  // How often the health watcher re-evaluates SERVING.
  std::chrono::milliseconds health_period{100};
  // Shutdown: admitted work may finish for this long; then what remains fails with
  // UNAVAILABLE and the server stops.
  std::chrono::milliseconds drain_timeout{30000};
  TlsOptions tls;
  AuthOptions auth;
  TransportLimits transport;
};

// What the model loader is asked for under `options`: device, KV cache size, threads, CUDA
// graphs, and the batch shape the engine will run. InvalidArgument for a bad --device.
absl::StatusOr<model::LoadOptions> load_options(const ServerOptions& options);

// OK, or InvalidArgument naming the flag (dashed, as typed: "--max-waiting") and its value
// when the options cannot serve: no model, a port out of range, a queue of 0, a context
// below 2 tokens, a negative or non-finite drain timeout, half a TLS configuration, ...
// Files named by TLS/auth options are checked to be readable; their contents are checked by
// Server::start().
absl::Status validate_server_options(const ServerOptions& options);

// docs/api.md spells flags with dashes (--metrics-port); absl flags use underscores
// (base/command_line.h, the one command-line parser of every binary).
using ::flashserve::dashes_to_underscores;

// A duration flag given in seconds (--drain-timeout 2.5): finite, >= 0, at most a day.
// InvalidArgument naming the flag otherwise.
absl::StatusOr<std::chrono::milliseconds> seconds_flag(absl::string_view flag, double seconds);

}  // namespace flashserve::api
