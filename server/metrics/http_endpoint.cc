#include "server/metrics/http_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace flashserve::metrics {
namespace {

struct HostPort {
  std::string host;
  std::string port;
};

absl::StatusOr<HostPort> split_host_port(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: bind address '", address, "' is not HOST:PORT"));
  }
  HostPort hp{address.substr(0, colon), address.substr(colon + 1)};
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  }
  int port = 0;
  if (!absl::SimpleAtoi(hp.port, &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: bad port '", hp.port, "' in bind address '", address, "'"));
  }
  return hp;
}

absl::StatusOr<int> bind_listener(const std::string& address) {
  ASSIGN_OR_RETURN(const HostPort hp, split_host_port(address));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const char* host = hp.host.empty() ? nullptr : hp.host.c_str();
  if (int rc = getaddrinfo(host, hp.port.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: cannot resolve '", address, "': ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0) {
      freeaddrinfo(found);
      return fd;
    }
    last_error = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  return absl::UnavailableError(
      absl::StrCat("metrics: cannot listen on '", address, "': ", last_error));
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

using Clock = std::chrono::steady_clock;

// Milliseconds left until `deadline` for poll(), at least 0.
int remaining_ms(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits until `fd` is ready for `events` or the wake pipe fires or the deadline passes.
bool wait_ready(int fd, short events, int wake_fd, Clock::time_point deadline) {
  for (;;) {
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int n = poll(fds, 2, remaining_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || fds[1].revents != 0) return false;
    return fds[0].revents != 0;
  }
}

// Best effort within the deadline: a client that does not read is dropped.
void write_all(int fd, const std::string& text, int wake_fd, Clock::time_point deadline) {
  std::string_view data = text;
  while (!data.empty()) {
    if (!wait_ready(fd, POLLOUT, wake_fd, deadline)) return;
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;  // the client went away; nothing to recover
    data.remove_prefix(static_cast<size_t>(n));
  }
}

enum class ReadOutcome { kOk, kClosed, kTimeout, kLineTooLong, kHeadersTooLarge };

// Reads until the end of the headers within the deadline; `*line` gets the request line.
ReadOutcome read_request(int fd, int wake_fd, Clock::time_point deadline,
                         const HttpEndpointOptions& options, std::string* line) {
  std::string request;
  char buf[1024];
  for (;;) {
    const size_t eol = request.find('\n');
    if (eol == std::string::npos && request.size() > static_cast<size_t>(options.max_request_line)) {
      return ReadOutcome::kLineTooLong;
    }
    if (eol != std::string::npos) {
      if (eol > static_cast<size_t>(options.max_request_line)) return ReadOutcome::kLineTooLong;
      // The headers: from after the request line to the blank line that ends them (or to
      // what has arrived). Checked before the end is looked for, so that headers past the
      // limit are refused however they arrive (in one piece too).
      const size_t end = std::min(request.find("\r\n\r\n"), request.find("\n\n"));
      const size_t header_bytes = std::min(end, request.size()) - (eol + 1);
      if (header_bytes > static_cast<size_t>(options.max_header_bytes)) {
        return ReadOutcome::kHeadersTooLarge;
      }
      if (end != std::string::npos) {
        *line = request.substr(0, request.find_first_of("\r\n"));
        return ReadOutcome::kOk;
      }
    }
    if (!wait_ready(fd, POLLIN, wake_fd, deadline)) return ReadOutcome::kTimeout;
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return ReadOutcome::kClosed;
    request.append(buf, static_cast<size_t>(n));
  }
}

std::string response(const std::string& status, const std::string& content_type,
                     const std::string& body, bool head) {
  std::string out = absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                                 "\r\nContent-Length: ", body.size(),
                                 "\r\nConnection: close\r\n\r\n");
  if (!head) out += body;
  return out;
}

std::string plain(const std::string& status, const std::string& body) {
  return response(status, "text/plain", body, false);
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::start(
    const std::string& bind_address, std::string path, std::function<std::string()> render,
    HttpEndpointOptions options) {
  if (options.max_connections < 1 || options.connection_deadline.count() <= 0) {
    return absl::InvalidArgumentError("metrics: max_connections and the deadline must be > 0");
  }
  ASSIGN_OR_RETURN(const int fd, bind_listener(bind_address));
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("metrics: pipe: ", std::strerror(errno)));
  }
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(fd, wake[0], wake[1], bound_port(fd),
                                                        std::move(path), std::move(render),
                                                        options));
}

HttpEndpoint::HttpEndpoint(int listen_fd, int wake_read_fd, int wake_write_fd, int port,
                           std::string path, std::function<std::string()> render,
                           HttpEndpointOptions options)
    : listen_fd_(listen_fd),
      wake_read_fd_(wake_read_fd),
      wake_write_fd_(wake_write_fd),
      port_(port),
      path_(std::move(path)),
      render_(std::move(render)),
      options_(options),
      thread_([this] { serve_loop(); }) {}

HttpEndpoint::~HttpEndpoint() {
  const char byte = 1;  // the pipe stays readable: every poll() on it wakes from now on
  while (write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  {
    std::unique_lock<std::mutex> lock(mu_);
    connections_done_.wait(lock, [this] { return num_connections_ == 0; });
  }
  close(listen_fd_);
  close(wake_read_fd_);
  close(wake_write_fd_);
}

void HttpEndpoint::serve_loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;  // the destructor asked us to stop
    if ((fds[0].revents & POLLIN) == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (num_connections_ >= options_.max_connections) {
        const std::string busy = plain("503 Service Unavailable", "too many connections\n");
        (void)!send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        close(fd);
        continue;
      }
      ++num_connections_;
    }
    std::thread([this, fd] { serve_connection(fd); }).detach();
  }
}

void HttpEndpoint::serve_connection(int fd) {
  const Clock::time_point deadline = Clock::now() + options_.connection_deadline;
  std::string line;
  switch (read_request(fd, wake_read_fd_, deadline, options_, &line)) {
    case ReadOutcome::kOk:
      write_all(fd, answer(line), wake_read_fd_, deadline);
      break;
    case ReadOutcome::kClosed:
      break;
    case ReadOutcome::kTimeout:
      write_all(fd, plain("408 Request Timeout", "request not received in time\n"),
                wake_read_fd_, Clock::now() + std::chrono::milliseconds(100));
      break;
    case ReadOutcome::kLineTooLong:
      write_all(fd, plain("414 URI Too Long", absl::StrCat("request line over ",
                                                          options_.max_request_line, " bytes\n")),
                wake_read_fd_, deadline);
      break;
    case ReadOutcome::kHeadersTooLarge:
      write_all(fd, plain("431 Request Header Fields Too Large",
                          absl::StrCat("headers over ", options_.max_header_bytes, " bytes\n")),
                wake_read_fd_, deadline);
      break;
  }
  close(fd);
  // Last touch of *this: the destructor cannot pass the wait before this unlocks.
  std::lock_guard<std::mutex> lock(mu_);
  --num_connections_;
  connections_done_.notify_all();
}

std::string HttpEndpoint::answer(const std::string& line) const {
  // "METHOD TARGET HTTP/x.y"; the query string, if any, is ignored.
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    return plain("400 Bad Request", "bad request line\n");
  }
  const std::string method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  const bool head = method == "HEAD";
  if (method != "GET" && !head) return plain("405 Method Not Allowed", "use GET\n");
  if (target != path_) {
    return response("404 Not Found", "text/plain", absl::StrCat("try ", path_, "\n"), head);
  }
  return response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render_(), head);
}

}  // namespace flashserve::metrics
