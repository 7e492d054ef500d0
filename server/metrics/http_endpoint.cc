#include "server/metrics/http_endpoint.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace flashserve::metrics {
namespace {

constexpr int kMaxRequestBytes = 8192;     // request line + headers; more is a bad request
constexpr int kReadTimeoutSeconds = 5;     // a silent client must not hold the endpoint

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
  absl::StatusOr<HostPort> hp = split_host_port(address);
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const char* host = hp->host.empty() ? nullptr : hp->host.c_str();
  if (int rc = getaddrinfo(host, hp->port.c_str(), &hints, &found); rc != 0) {
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

void write_all(int fd, const std::string& text) {
  std::string_view data = text;
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away; nothing to recover
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Reads until the end of the headers; returns the request line, or "" on timeout/garbage.
std::string read_request_line(int fd) {
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.find("\n\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) return "";
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    request.append(buf, static_cast<size_t>(n));
  }
  return request.substr(0, request.find_first_of("\r\n"));
}

std::string response(const std::string& status, const std::string& content_type,
                     const std::string& body, bool head) {
  std::string out = absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                                 "\r\nContent-Length: ", body.size(),
                                 "\r\nConnection: close\r\n\r\n");
  if (!head) out += body;
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::start(
    const std::string& bind_address, std::string path, std::function<std::string()> render) {
  absl::StatusOr<int> fd = bind_listener(bind_address);
  if (!fd.ok()) return fd.status();
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(*fd);
    return absl::InternalError(absl::StrCat("metrics: pipe: ", std::strerror(errno)));
  }
  return std::unique_ptr<HttpEndpoint>(new HttpEndpoint(
      *fd, wake[0], wake[1], bound_port(*fd), std::move(path), std::move(render)));
}

HttpEndpoint::HttpEndpoint(int listen_fd, int wake_read_fd, int wake_write_fd, int port,
                           std::string path, std::function<std::string()> render)
    : listen_fd_(listen_fd),
      wake_read_fd_(wake_read_fd),
      wake_write_fd_(wake_write_fd),
      port_(port),
      path_(std::move(path)),
      render_(std::move(render)),
      thread_([this] { serve_loop(); }) {}

HttpEndpoint::~HttpEndpoint() {
  const char byte = 1;
  while (write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
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
    serve_connection(fd);
    close(fd);
  }
}

void HttpEndpoint::serve_connection(int fd) {
  timeval timeout{kReadTimeoutSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  const std::string line = read_request_line(fd);
  if (line.empty()) return;
  // "METHOD TARGET HTTP/x.y"; the query string, if any, is ignored.
  const size_t sp1 = line.find(' ');
  const size_t sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos) {
    write_all(fd, response("400 Bad Request", "text/plain", "bad request line\n", false));
    return;
  }
  const std::string method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    write_all(fd, response("405 Method Not Allowed", "text/plain", "use GET\n", false));
  } else if (target != path_) {
    write_all(fd, response("404 Not Found", "text/plain", absl::StrCat("try ", path_, "\n"), head));
  } else {
    write_all(fd, response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render_(), head));
  }
}

}  // namespace flashserve::metrics
