// The /metrics HTTP endpoint under abusive clients (issue 10, defect 1): idle and slow-drip
// connections must not delay other scrapes, each connection has one total deadline, and
// oversized request lines/headers get 414/431 instead of a reset.
#include "server/metrics/http_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace flashserve::metrics {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool send_text(int fd, const std::string& text) {
  return send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// Reads until the server closes (or 10 s pass: a hang fails the test, it does not block it).
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < give_up) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string request(int port, const std::string& text) {
  int fd = connect_loopback(port);
  if (fd < 0) return "connect failed";
  std::string out = send_text(fd, text) ? read_all(fd) : "send failed";
  close(fd);
  return out;
}

std::unique_ptr<HttpEndpoint> start(HttpEndpointOptions options = {}) {
  auto endpoint = HttpEndpoint::start("127.0.0.1:0", "/metrics",
                                      [] { return std::string("up 1\n"); }, options);
  EXPECT_TRUE(endpoint.ok()) << endpoint.status();
  return endpoint.ok() ? std::move(*endpoint) : nullptr;
}

const std::string kScrape = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

// Polls (at most 10 s) until the endpoint's thread holds `n` connections.
bool wait_for_connections(const HttpEndpoint& endpoint, int n) {
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (endpoint.num_connections() != n) {
    if (Clock::now() > give_up) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

TEST(HttpEndpointTest, IdleAndSlowClientsDoNotDelayAScrape) {
  HttpEndpointOptions options;
  options.connection_deadline = std::chrono::seconds(30);  // far longer than the scrape
  auto endpoint = start(options);
  ASSERT_NE(endpoint, nullptr);
  const int idle = connect_loopback(endpoint->port());
  const int slow = connect_loopback(endpoint->port());
  ASSERT_GE(idle, 0);
  ASSERT_GE(slow, 0);
  ASSERT_TRUE(send_text(slow, "G"));  // a slow-drip client, mid request line
  ASSERT_TRUE(wait_for_connections(*endpoint, 2));  // both accepted and held
  const auto begin = Clock::now();
  const std::string response = request(endpoint->port(), kScrape);
  const auto took = Clock::now() - begin;
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK", 0), 0u) << response;
  EXPECT_NE(response.find("up 1"), std::string::npos);
  // With one connection at a time this waited for the 30 s deadline of the idle client.
  EXPECT_LT(took, std::chrono::seconds(5));
  close(idle);
  close(slow);
}

TEST(HttpEndpointTest, ASlowDripClientIsCutOffAtTheTotalDeadline) {
  HttpEndpointOptions options;
  options.connection_deadline = milliseconds(600);
  auto endpoint = start(options);
  ASSERT_NE(endpoint, nullptr);
  const int fd = connect_loopback(endpoint->port());
  ASSERT_GE(fd, 0);
  // One byte every 100 ms: each read succeeds, so a per-read timeout never fires.
  const auto begin = Clock::now();
  std::atomic<bool> stop{false};
  std::thread drip([&] {
    const std::string text = "GET /metrics HTTP/1.1\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for (char c : text) {
      if (stop.load() || !send_text(fd, std::string(1, c))) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  const std::string response = read_all(fd);
  const auto took = Clock::now() - begin;
  stop.store(true);
  drip.join();
  close(fd);
  EXPECT_EQ(response.rfind("HTTP/1.1 408", 0), 0u) << response;
  EXPECT_GE(took, milliseconds(500));
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(HttpEndpointTest, OversizedRequestLineGets414) {
  auto endpoint = start();
  ASSERT_NE(endpoint, nullptr);
  // Without a newline at all, and with one after the limit.
  const std::string long_target = "GET /" + std::string(5000, 'a');
  EXPECT_EQ(request(endpoint->port(), long_target).rfind("HTTP/1.1 414", 0), 0u);
  EXPECT_EQ(request(endpoint->port(), long_target + " HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 414", 0),
            0u);
}

TEST(HttpEndpointTest, OversizedHeadersGet431) {
  auto endpoint = start();
  ASSERT_NE(endpoint, nullptr);
  std::string text = "GET /metrics HTTP/1.1\r\n";
  for (int i = 0; i < 200; ++i) text += "X-Filler-" + std::to_string(i) + ": " + std::string(60, 'b') + "\r\n";
  const std::string response = request(endpoint->port(), text);
  EXPECT_EQ(response.rfind("HTTP/1.1 431", 0), 0u) << response.substr(0, 80);
  // Headers just under the limit are fine.
  EXPECT_EQ(request(endpoint->port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(8000, 'c') +
                                          "\r\n\r\n").rfind("HTTP/1.1 200", 0), 0u);
  // Issue 23: headers a little past the limit, complete in one piece, are refused too (the
  // end of the headers was found before their size was checked: ~9 KB got through).
  const std::string just_over = "GET /metrics HTTP/1.1\r\nX: " + std::string(8190, 'd') +
                                "\r\n\r\n";
  EXPECT_EQ(request(endpoint->port(), just_over).rfind("HTTP/1.1 431", 0), 0u);
  const std::string nine_kb = "GET /metrics HTTP/1.1\r\nX: " + std::string(9200, 'e') +
                              "\r\n\r\n";
  EXPECT_EQ(request(endpoint->port(), nine_kb).rfind("HTTP/1.1 431", 0), 0u);
}

TEST(HttpEndpointTest, ConnectionsBeyondTheLimitGet503AndOthersStillServe) {
  HttpEndpointOptions options;
  options.max_connections = 2;
  options.connection_deadline = std::chrono::seconds(30);
  auto endpoint = start(options);
  ASSERT_NE(endpoint, nullptr);
  const int a = connect_loopback(endpoint->port());
  const int b = connect_loopback(endpoint->port());
  ASSERT_TRUE(wait_for_connections(*endpoint, 2));  // both accepted and held
  EXPECT_EQ(request(endpoint->port(), kScrape).rfind("HTTP/1.1 503", 0), 0u);
  close(a);
  close(b);  // the held connections end at once (the client closed), freeing their slots
  ASSERT_TRUE(wait_for_connections(*endpoint, 0));
  const std::string response = request(endpoint->port(), kScrape);
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response;
}

TEST(HttpEndpointTest, DestructorDoesNotWaitForIdleClients) {
  HttpEndpointOptions options;
  options.connection_deadline = std::chrono::seconds(60);
  auto endpoint = start(options);
  ASSERT_NE(endpoint, nullptr);
  const int fd = connect_loopback(endpoint->port());
  ASSERT_TRUE(wait_for_connections(*endpoint, 1));
  const auto begin = Clock::now();
  endpoint.reset();
  EXPECT_LT(Clock::now() - begin, std::chrono::seconds(5));
  close(fd);
}

}  // namespace
}  // namespace flashserve::metrics
