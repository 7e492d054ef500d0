#pragma once
// A minimal HTTP/1.1 endpoint that serves one text document (the Prometheus exposition) at one
// path. Why not prometheus-cpp's Exposer: it runs on civetweb, whose worker threads get a
// fixed ~100 KiB stack; glibc carves every loaded library's static TLS out of that stack
// (OpenBLAS alone takes 60 KiB, cudart 4 KiB more), and a scrape then overflows the stack and
// kills the server. This endpoint's threads get the process's default stack.
//
// Threads: one accept loop (started by start(), joined by the destructor) and one short-lived
// detached thread per connection, at most `max_connections` at once (beyond that: 503 at
// once); the destructor waits until every connection thread has finished. Each connection has one total
// deadline for reading its request and writing the answer, so a silent client or one that
// sends a byte a second is dropped when the deadline passes and never delays other scrapes.
// A request line longer than `max_request_line` bytes gets 414, headers over
// `max_header_bytes` get 431, a client too slow for the deadline 408.
//
// Thread-safety: start() and the destructor from one thread; `render` is called on
// connection threads, possibly concurrently, and must be thread-safe.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace flashserve::metrics {

struct HttpEndpointOptions {
  int max_connections = 16;                           // served at once
  std::chrono::milliseconds connection_deadline{5000};  // read request + write answer
  int max_request_line = 4096;                        // bytes, "GET /metrics HTTP/1.1"
  int max_header_bytes = 8192;                        // bytes after the request line
};

class HttpEndpoint {
 public:
  // Binds `bind_address` ("HOST:PORT", "[V6HOST]:PORT"; port 0 = any free port) and starts
  // serving GET/HEAD `path`. InvalidArgument for a malformed address, Unavailable when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> start(
      const std::string& bind_address, std::string path, std::function<std::string()> render,
      HttpEndpointOptions options = {});
  // Stops accepting, wakes and waits for every connection thread, closes the sockets.
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  int port() const { return port_; }
  // Connections accepted and not yet closed (their threads alive).
  int num_connections() const {
    std::lock_guard<std::mutex> lock(mu_);
    return num_connections_;
  }

 private:
  HttpEndpoint(int listen_fd, int wake_read_fd, int wake_write_fd, int port, std::string path,
               std::function<std::string()> render, HttpEndpointOptions options);
  void serve_loop();
  // Runs on a connection thread; closes `fd`.
  void serve_connection(int fd);
  std::string answer(const std::string& request_line) const;

  const int listen_fd_;
  const int wake_read_fd_;   // the destructor writes a byte to wake poll()
  const int wake_write_fd_;
  const int port_;
  const std::string path_;
  const std::function<std::string()> render_;
  const HttpEndpointOptions options_;
  mutable std::mutex mu_;
  std::condition_variable connections_done_;
  int num_connections_ = 0;  // GUARDED_BY(mu_): connection threads alive
  std::thread thread_;
};

}  // namespace flashserve::metrics
