// End-to-end abuse of the OpenAI HTTP port (issue 23: "when the OpenAI HTTP API lands, its
// port gets the same treatment"), each bounded and on loopback, each ending with the server
// still serving (a completion over HTTP, health over gRPC) and its resident memory back near
// the baseline: slow clients (headers trickled, a connection that never sends, uploads that
// stall, a client that never reads its event stream), an endless chunked body, bodies and
// headers past the limits, malformed JSON, the bearer scheme in any case, and a client that
// disconnects mid-stream. docs/security-probe.md lists every attack with the test that pins it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/e2e/server/e2e_util.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "http-abuse-token";
// As Http2AbuseE2E: allocator caches, the HeapTrimmer's threshold (32 MiB).
constexpr int64_t kMemorySlackKib = 64 * 1024;

// A plain TCP connection to 127.0.0.1:port; sends what it is given, reads with a deadline.
class Socket {
 public:
  explicit Socket(int port, int receive_buffer = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (receive_buffer > 0) {  // before connect: the window the server sees
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    const timeval send_timeout{2, 0};  // a server that stops reading fails our sends
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }
  bool send(const std::string& bytes) {
    return send_all(fd_, bytes);
  }
  // Reads until `text` arrives, the server closes, or `timeout`; what arrived so far.
  std::string read_until(const std::string& text,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto give_up = Clock::now() + timeout;
    char chunk[16384];
    while (received_.find(text) == std::string::npos && !closed_ && Clock::now() < give_up) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up -
                                                                            Clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left.count(), 0, 50))) <= 0) {
        continue;
      }
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      received_.append(chunk, static_cast<size_t>(n));
    }
    return received_;
  }
  // True once the server has closed the connection (reads and drops what comes first).
  bool closed_by_server(std::chrono::milliseconds timeout) {
    read_until(std::string(1, '\0'), timeout);
    return closed_;
  }
  int status() {
    read_until("\r\n");
    return received_.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(received_.substr(9, 3)) : 0;
  }
  // The body of a Content-Length answer.
  std::string body() {
    read_until("\r\n\r\n");
    const size_t start = received_.find("\r\n\r\n");
    const size_t at = received_.find("Content-Length: ");
    if (start == std::string::npos || at == std::string::npos) return "";
    const size_t length = std::stoul(received_.substr(at + 16));
    while (received_.size() < start + 4 + length && !closed_) {
      read_until(std::string(1, '\0'), std::chrono::milliseconds(100));
    }
    return received_.substr(start + 4, length);
  }
  // Closes our sending half (the server reads the end of the stream), still reading.
  void finish_sending() { ::shutdown(fd_, SHUT_WR); }
  void close_now() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string received_;
};

std::string request(const std::string& method, const std::string& path, const std::string& body,
                    const std::string& headers = std::string("Authorization: Bearer ") +
                                                 kToken + "\r\n") {
  return method + " " + path + " HTTP/1.1\r\nHost: x\r\n" + headers +
         "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

std::string completion_body(int max_tokens, bool stream) {
  return Json{{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0},
              {"ignore_eos", true}, {"stream", stream}}
      .dump();
}

class HttpAbuseE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string model = default_model_path();
    if (model.empty()) return;
    token_file_ = ::testing::TempDir() + "/http_abuse_tokens";
    std::ofstream(token_file_) << kToken << "\n";
    auto server = ServerProcess::start(model, {"--max-num-seqs", "4", "--auth-token-file",
                                               token_file_, "--threads", "1"});
    if (!server.ok() || !(*server)->wait_serving().ok() || (*server)->http_port() == 0) return;
    server_ = std::move(*server);
    for (int i = 0; i < 2; ++i) complete(4);  // warm up
    baseline_kib_ = server_->rss_kib();
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->stop(SIGTERM), 0) << server_->log();
    }
    server_.reset();
    std::remove(token_file_.c_str());
  }
  void SetUp() override {
    if (server_ == nullptr) GTEST_SKIP() << "default model not in models/ (or no server)";
  }

  // A whole completion of `max_tokens` over HTTP: its status.
  static int complete(int max_tokens) {
    Socket s(server_->http_port());
    s.send(request("POST", "/v1/completions", completion_body(max_tokens, false)));
    return s.status();
  }
  static double metric(const std::string& name, const std::string& labels = "") {
    auto text = server_->scrape_metrics();
    if (!text.ok()) return -1;
    auto value = metric_value(*text, name, labels);
    return value.ok() ? *value : -1;
  }
  // The server answers a completion and gRPC health, and its memory comes back near the
  // baseline (polled: the HeapTrimmer looks once a second).
  static void expect_serving_and_memory_back() {
    EXPECT_EQ(complete(2), 200);
    EXPECT_EQ(server_->health(), grpc::health::v1::HealthCheckResponse::SERVING);
    expect_rss_back(*server_, baseline_kib_, kMemorySlackKib, std::chrono::seconds(10));
  }

  static std::unique_ptr<ServerProcess> server_;
  static int64_t baseline_kib_;
  static std::string token_file_;
};

std::unique_ptr<ServerProcess> HttpAbuseE2E::server_;
int64_t HttpAbuseE2E::baseline_kib_ = 0;
std::string HttpAbuseE2E::token_file_;

// Slowloris: 200 connections trickle their headers (a header line a second, never the end),
// 50 connect and never send. Others are served meanwhile, and every one of them is closed 10 s
// after it opened (the header timeout; before it, the trickling ones held their connection as
// long as they kept trickling, and this test failed).
TEST_F(HttpAbuseE2E, SlowHeadersAreClosedAndOthersServed) {
  constexpr int kNumSlow = 250;
  std::vector<std::unique_ptr<Socket>> slow;
  const auto opened = Clock::now();
  for (int i = 0; i < kNumSlow; ++i) {
    slow.push_back(std::make_unique<Socket>(server_->http_port()));
    ASSERT_TRUE(slow.back()->connected());
    if (i < 200) {
      ASSERT_TRUE(slow.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));
    }
  }
  std::vector<bool> closed(kNumSlow, false);
  int num_closed = 0;
  for (int second = 0; second < 14 && num_closed < kNumSlow; ++second) {
    EXPECT_EQ(complete(1), 200);  // others are served meanwhile
    for (int i = 0; i < kNumSlow; ++i) {
      if (closed[i]) continue;
      const bool trickled =
          i >= 200 || slow[i]->send("X-Slow-" + std::to_string(second) + ": y\r\n");
      closed[i] = !trickled || slow[i]->closed_by_server(std::chrono::milliseconds(1));
      num_closed += closed[i] ? 1 : 0;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - opened).count();
  std::printf("slow headers: %d of %d closed within %.1f s of opening\n", num_closed, kNumSlow,
              seconds);
  EXPECT_EQ(num_closed, kNumSlow);
  expect_serving_and_memory_back();
}

// A chunked body (no Content-Length) that never ends: past the 2 MiB limit the connection is
// closed (libmicrohttpd cannot answer mid-body). Before, the server read and dropped it
// forever (20 GB in 10 s on loopback).
TEST_F(HttpAbuseE2E, EndlessChunkedBodyIsCutOff) {
  Socket s(server_->http_port());
  ASSERT_TRUE(s.send(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: "
                                 "Bearer ") + kToken + "\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "10000\r\n" + std::string(65536, 'a') + "\r\n";
  int64_t num_sent = 0;
  while (num_sent < (int64_t{256} << 20) && s.send(chunk)) num_sent += 65536;
  std::printf("endless chunked body: cut off after %lld KiB\n",
              static_cast<long long>(num_sent >> 10));
  EXPECT_LT(num_sent, int64_t{256} << 20);
  EXPECT_TRUE(s.closed_by_server(std::chrono::seconds(5)));
  expect_serving_and_memory_back();
}

// 250 connections each announce a 2 MiB body and send all of it but its last byte, then
// stall (500 MiB): the server holds at most its budget of 256 MiB of bodies (128 of them);
// the others get 503 at their headers. Before the budget all 250 were held (+500 MB). When
// the clients leave, the server closes their connections and the bodies' memory leaves it
// (server/http/body_buffer.h).
TEST_F(HttpAbuseE2E, StalledBodiesAreBounded) {
  constexpr int kNumClients = 250;
  constexpr size_t kBody = 2 << 20;
  std::vector<std::unique_ptr<Socket>> clients;
  for (int i = 0; i < kNumClients; ++i) {
    clients.push_back(std::make_unique<Socket>(server_->http_port()));
    ASSERT_TRUE(clients.back()->send(
        std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
        kToken + "\r\nContent-Length: " + std::to_string(kBody) + "\r\n\r\n"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the refusals come at once
  int num_refused = 0;
  std::vector<Socket*> held;
  for (auto& client : clients) {
    if (client->read_until("\r\n", std::chrono::milliseconds(1)).empty()) {
      EXPECT_TRUE(client->send(std::string(kBody - 1, 'b')));  // held: all but the last byte
      held.push_back(client.get());
      continue;
    }
    ++num_refused;
    EXPECT_EQ(client->status(), 503);
    const Json error = Json::parse(client->body(), nullptr, false);
    EXPECT_TRUE(error.is_object() && error["error"]["type"] == "service_unavailable_error");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the server has read them
  const int64_t held_kib = server_->rss_kib();
  std::printf("stalled bodies: %d of %d refused; RSS +%lld KiB while the rest are held\n",
              num_refused, kNumClients, static_cast<long long>(held_kib - baseline_kib_));
  EXPECT_EQ(num_refused, kNumClients - 128);
  if (kRssBoundsApply) {
    EXPECT_LE(held_kib, baseline_kib_ + 256 * 1024 + kMemorySlackKib);
  }
  // The held clients leave a byte short; the server closes each such connection and gives
  // its body back, within 10 s (before the watcher of abandoned uploads in
  // server/http/http_server.cc, 3 of the 128 stayed until the 60 s idle timeout when the
  // machine was busy). Waited for: asking for a completion at once raced the server's
  // reading of the 128 closes.
  const auto left = Clock::now();
  for (Socket* client : held) client->finish_sending();
  int num_closed = 0;
  const auto deadline = left + std::chrono::seconds(10);
  for (Socket* client : held) {
    num_closed += client->closed_by_server(std::max(
        std::chrono::milliseconds(1),
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())));
  }
  std::printf("stalled bodies: %d of %zu held connections closed by the server %.2f s after "
              "their clients left\n",
              num_closed, held.size(),
              std::chrono::duration<double>(Clock::now() - left).count());
  EXPECT_EQ(num_closed, static_cast<int>(held.size()));
  clients.clear();
  // A close that the server's upload watcher made (a shutdown from its own thread) reaches
  // us before libmicrohttpd's thread has ended the request and given its body back: a
  // completion is refused (503) until it has, which takes one turn of that thread.
  int status = 0;
  while (status != 200 && Clock::now() < deadline) {
    status = complete(2);
    if (status == 503) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, 200) << "the bodies' budget was not given back within 10 s";
  expect_serving_and_memory_back();
}

// Past the limits: a 3 MiB Content-Length gets 413 in OpenAI's error shape before the body is
// read; 40 KB of headers get 431 (libmicrohttpd's own answer).
TEST_F(HttpAbuseE2E, HugeBodiesAndHeadersAreRefused) {
  Socket big(server_->http_port());
  big.send(std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
           kToken + "\r\nContent-Length: 3145728\r\n\r\n");
  EXPECT_EQ(big.status(), 413);
  const Json error = Json::parse(big.body(), nullptr, false);
  ASSERT_TRUE(error.is_object());
  EXPECT_EQ(error["error"]["type"], "invalid_request_error");
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("3145728 bytes"));
  Socket headers(server_->http_port());
  headers.send("GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(40000, 'h') +
               "\r\n\r\n");
  EXPECT_EQ(headers.status(), 431);
  expect_serving_and_memory_back();
}

// Malformed JSON: 400 whose message says where and what (before: "body: is not valid JSON").
TEST_F(HttpAbuseE2E, MalformedJsonNamesTheProblem) {
  Socket s(server_->http_port());
  s.send(request("POST", "/v1/completions", R"({"prompt": "Hi", "max_tokens": })"));
  EXPECT_EQ(s.status(), 400);
  const Json error = Json::parse(s.body(), nullptr, false);
  ASSERT_TRUE(error.is_object());
  EXPECT_EQ(error["error"]["param"], "body");
  EXPECT_THAT(error["error"]["message"].get<std::string>(),
              HasSubstr("line 1, column 32: syntax error while parsing value - unexpected '}'"));
  expect_serving_and_memory_back();
}

// The bearer scheme in any case, as on gRPC (RFC 7235; "bearer TOKEN" got 401 here); a wrong
// token gets 401 in OpenAI's shape and counts in flashserve_auth_failures_total.
TEST_F(HttpAbuseE2E, BearerSchemeIsCaseInsensitive) {
  const double failures = metric("flashserve_auth_failures_total");
  for (const std::string scheme : {"bearer", "BEARER", "Bearer "}) {
    Socket s(server_->http_port());
    s.send(request("GET", "/v1/models", "", "Authorization: " + scheme + " " + kToken + "\r\n"));
    EXPECT_EQ(s.status(), 200) << scheme;
  }
  Socket wrong(server_->http_port());
  wrong.send(request("GET", "/v1/models", "", "Authorization: bearer not-the-token\r\n"));
  EXPECT_EQ(wrong.status(), 401);
  const Json error = Json::parse(wrong.body(), nullptr, false);
  ASSERT_TRUE(error.is_object());
  EXPECT_EQ(error["error"]["type"], "authentication_error");
  EXPECT_EQ(metric("flashserve_auth_failures_total"), failures + 1);
  expect_serving_and_memory_back();
}

// A client that never reads its event stream (a 4 KiB receive window; 96 tokens with their
// logprobs, ~40 KB of events): the engine does not wait for it (the request finishes and
// another is served meanwhile); its events wait in the server, bounded by the request's own
// tokens, and all of them arrive once the client reads.
TEST_F(HttpAbuseE2E, ClientThatNeverReadsItsStream) {
  const std::string finished = R"(api="http",status="length")";
  const double before = metric("flashserve_requests_total", finished);
  Socket stuck(server_->http_port(), /*receive_buffer=*/4096);
  const std::string body = Json{{"prompt", "Once upon a time"}, {"max_tokens", 96},
                                {"temperature", 0}, {"ignore_eos", true}, {"stream", true},
                                {"logprobs", 5}}.dump();
  ASSERT_TRUE(stuck.send(request("POST", "/v1/completions", body)));
  EXPECT_EQ(complete(2), 200);  // served beside it
  const auto give_up = Clock::now() + std::chrono::seconds(15);
  while (metric("flashserve_requests_total", finished) < before + 2 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(metric("flashserve_requests_total", finished), before + 2);
  EXPECT_EQ(metric("flashserve_requests_running"), 0);
  const std::string events = stuck.read_until("data: [DONE]");
  EXPECT_THAT(events, HasSubstr("\"finish_reason\":\"length\""));
  EXPECT_THAT(events, HasSubstr("data: [DONE]"));
  std::printf("never-read stream: %zu bytes delivered after the request finished\n",
              events.size());
  expect_serving_and_memory_back();
}

// A client that leaves mid-stream: its request is cancelled at the engine's next step and
// leaves nothing behind (no sequence running, no KV block in use).
TEST_F(HttpAbuseE2E, DisconnectMidStreamLeavesNothing) {
  const std::string cancelled = R"(api="http",status="cancelled")";
  const double before = std::max(0.0, metric("flashserve_requests_total", cancelled));
  Socket s(server_->http_port());
  ASSERT_TRUE(s.send(request("POST", "/v1/completions", completion_body(400, true))));
  EXPECT_THAT(s.read_until("data: {"), HasSubstr("data: {"));
  s.close_now();
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (metric("flashserve_requests_total", cancelled) < before + 1 && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(metric("flashserve_requests_total", cancelled), before + 1);
  EXPECT_EQ(metric("flashserve_requests_running"), 0);
  EXPECT_EQ(metric("flashserve_kv_cache_blocks_used"), 0);
  expect_serving_and_memory_back();
}

}  // namespace
}  // namespace flashserve::e2e
