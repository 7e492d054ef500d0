#pragma once
// A minimal HTTP/1.1 endpoint that serves one text document (the Prometheus exposition) at one
// path. Why not prometheus-cpp's Exposer: it runs on civetweb, whose worker threads get a
// fixed ~100 KiB stack; glibc carves every loaded library's static TLS out of that stack
// (OpenBLAS alone takes 60 KiB, cudart 4 KiB more), and a scrape then overflows the stack and
// kills the server. This endpoint's one thread has the process's default stack.
//
// Thread-safety: start() and the destructor from one thread; `render` is called on the
// endpoint's thread and must be thread-safe. One connection is served at a time (scrapes are
// rare and small); a client that sends nothing is dropped after a read timeout.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace flashserve::metrics {

class HttpEndpoint {
 public:
  // Binds `bind_address` ("HOST:PORT", "[V6HOST]:PORT"; port 0 = any free port) and starts
  // serving GET/HEAD `path`. InvalidArgument for a malformed address, Unavailable when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> start(const std::string& bind_address,
                                                             std::string path,
                                                             std::function<std::string()> render);
  ~HttpEndpoint();  // stops the thread and closes the socket
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  int port() const { return port_; }

 private:
  HttpEndpoint(int listen_fd, int wake_read_fd, int wake_write_fd, int port, std::string path,
               std::function<std::string()> render);
  void serve_loop();
  void serve_connection(int fd);

  const int listen_fd_;
  const int wake_read_fd_;   // the destructor writes a byte to wake poll()
  const int wake_write_fd_;
  const int port_;
  const std::string path_;
  const std::function<std::string()> render_;
  std::thread thread_;
};

}  // namespace flashserve::metrics
