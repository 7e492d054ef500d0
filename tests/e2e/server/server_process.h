#pragma once
// Test harness: runs the real `flashserve` binary as a child process on free loopback ports
// (--host 127.0.0.1 --port 0 --metrics-port 0; the ports are read back from its log) and
// gives tests gRPC stubs, health checks and /metrics scrapes. Everything is bounded by
// timeouts; the destructor kills a server that is still running.
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "flashserve/v1/generation.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace flashserve::e2e {

// Whether the server's resident memory says what it holds, so that the e2e tests' RSS
// bounds apply: not in a build with AddressSanitizer or ThreadSanitizer (scripts/sanitize.sh),
// whose allocators keep what is freed (ASan's quarantine, and no malloc_trim behind the
// server's HeapTrimmer): there RSS only grows, +0.1-1 GB over these tests with nothing
// leaked, and LeakSanitizer checks for leaks at the server's exit instead. The tests print
// the RSS either way.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kRssBoundsApply = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kRssBoundsApply = false;
#else
inline constexpr bool kRssBoundsApply = true;
#endif
#else
inline constexpr bool kRssBoundsApply = true;
#endif

// The default model, or $FLASHSERVE_E2E_MODEL; empty when the file does not exist.
std::string default_model_path();
// The server and CLI binaries: the build's, or FLASHSERVE_E2E_SERVER_BIN /
// FLASHSERVE_E2E_CLI_BIN when set (the bundled binaries on a GPU machine).
std::string server_binary();
std::string cli_binary();
// bench/serving's flashserve-canned-server (or FLASHSERVE_E2E_CANNED_SERVER_BIN).
std::string canned_server_binary();
// This folder's flashserve-stall-server, flashserve with a stallable runner (or
// FLASHSERVE_E2E_STALL_SERVER_BIN).
std::string stall_server_binary();

// Runs a shell command line; its exit code (-1 if it did not exit normally) and its stdout
// (append " 2>&1" to the command for stderr too).
struct CommandResult {
  int exit_code = -1;
  std::string out;
};
CommandResult run_command(const std::string& command);

class ServerProcess {
 public:
  // Starts the server with `extra_args` and waits until both ports are in its log (the
  // model may still be loading). Error with the log's tail if it exits or times out.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> start(
      const std::string& model_path, const std::vector<std::string>& extra_args,
      std::chrono::seconds timeout = std::chrono::seconds(60));
  // The same with another server binary that takes the same flags and logs the same lines
  // (flashserve-canned-server).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> start_binary(
      const std::string& binary, const std::string& model_path,
      const std::vector<std::string>& extra_args,
      std::chrono::seconds timeout = std::chrono::seconds(60));
  ~ServerProcess();

  // Polls health until SERVING (OK) or the timeout.
  absl::Status wait_serving(std::chrono::seconds timeout = std::chrono::seconds(120));
  // Health of "" (the whole server); UNKNOWN with a non-OK status on RPC failure.
  grpc::health::v1::HealthCheckResponse::ServingStatus health(grpc::Status* rpc_status = nullptr);

  // Sends `signal` and waits for the process to exit; returns its exit status (-1 on timeout,
  // 128+N when killed by signal N).
  int stop(int signal, std::chrono::seconds timeout = std::chrono::seconds(60));
  bool running();
  // Sends `signal` without waiting (e.g. SIGHUP).
  void send_signal(int signal);
  // Replaces the plaintext channel used by channel(), stub(), health() (e.g. with a TLS one).
  void set_channel(std::shared_ptr<grpc::Channel> channel) { channel_ = std::move(channel); }

  pid_t pid() const { return pid_; }
  // Resident set size of the server process (VmRSS), in KiB; -1 if it cannot be read.
  int64_t rss_kib() const;
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  // The OpenAI HTTP API's port (0 when the server does not serve HTTP).
  int http_port() const { return http_port_; }
  // "127.0.0.1:PORT", or the --host the test gave ("[::1]:PORT").
  std::string target() const { return grpc_host_ + ":" + std::to_string(grpc_port_); }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  std::unique_ptr<v1::Generation::Stub> stub() const { return v1::Generation::NewStub(channel_); }

  // GET /metrics (HTTP/1.0 on 127.0.0.1). Body only.
  absl::StatusOr<std::string> scrape_metrics() const;
  // Everything the server has logged so far.
  std::string log() const;

 private:
  ServerProcess() = default;

  pid_t pid_ = -1;
  std::optional<int> exit_status_;
  std::string log_path_;
  std::string grpc_host_ = "127.0.0.1";  // as the server's log names it
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
};

// Value of the first sample of `name` whose labels include each of `labels` (comma-separated
// pairs exactly as exposed, e.g. `status="length"`; other labels such as the constant `model`
// label are ignored; empty matches any) in a Prometheus text exposition; NotFound if absent.
absl::StatusOr<double> metric_value(const std::string& exposition, const std::string& name,
                                    const std::string& labels = "");

// Sets a deadline `timeout` from now on a fresh context.
std::unique_ptr<grpc::ClientContext> context_with_timeout(std::chrono::milliseconds timeout);

}  // namespace flashserve::e2e
