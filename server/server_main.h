#pragma once
// The life cycle every flashserve server binary shares: its flags (docs/api.md), the log
// (--log-format), signals, the start-up order and the bounded drain.
//
//   flashserve (server/main.cc)              serves the GGUF file through model::load_model;
//   flashserve-canned-server (bench/serving) serves the file's tokenizer over a runner that
//                                            answers at once (what the pipeline sustains);
//   flashserve-stall-server (tests/e2e)      serves the real model behind a runner that can be
//                                            made to stall (the stalled-engine e2e test).
//
// Each passes its own ModelSource; flags, logs, health and shutdown are the same, so tests
// and scripts drive any of them alike (they read "listening on HOST:PORT (gRPC)").
//
// Start-up: the flags are checked (a configuration that cannot serve is refused with exit
// code 2), the gRPC and metrics ports are bound (health NOT_SERVING, Generation UNAVAILABLE),
// then the model loads on a separate thread; health turns SERVING once the engine runs.
// SIGINT/SIGTERM: NOT_SERVING, drain for at most --drain-timeout (then what remains fails with
// UNAVAILABLE), exit; a second signal exits at once, and so does a drain stuck past its limit
// plus kShutdownSlack. SIGHUP re-reads --auth-token-file. Logs go to stderr, as text or JSON
// (--log-format), with one access line per generation call.
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "model/model_loader.h"
#include "server/api/server_options.h"

namespace flashserve::server {

// Loads (or builds) the model to serve under `options`; called once, on the loader thread.
using ModelSource =
    std::function<absl::StatusOr<model::LoadedModel>(const api::ServerOptions& options)>;

struct ServerBinary {
  std::string name;   // "flashserve": the log's program name in --version and usage
  std::string usage;  // the usage text after the name (its own flags, then "[server flags]")
  // The source file that defines the binary's own flags (__FILE__ of its main), listed by
  // --help together with the shared ones; empty when it has none.
  std::string flags_file;
  ModelSource load_model;
};

// flashserve's model: model::load_model(options.model_path, api::load_options(options)).
absl::StatusOr<model::LoadedModel> load_model_file(const api::ServerOptions& options);

// Parses the flags, serves until SIGINT/SIGTERM and returns the process's exit code: 0 after
// a drain, 1 when the server cannot start or the model cannot load, 2 for bad flags. Call once
// per process, from main().
int run_server(int argc, char** argv, const ServerBinary& binary);

}  // namespace flashserve::server
