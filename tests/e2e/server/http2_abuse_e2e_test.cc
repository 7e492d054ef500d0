// End-to-end abuse of the gRPC port (issue 23, item 6), each bounded and on loopback, each
// ending with the server still serving (health SERVING, a generation succeeds) and its
// resident memory back near the baseline measured before: HTTP/2 rapid reset (streams reset
// as soon as they are opened, twice), a CONTINUATION flood (a header block that never ends),
// a SETTINGS flood, a ping flood (GOAWAY ENHANCE_YOUR_CALM "too_many_pings"), and an IPv6
// listen address (gRPC and HTTP). The frames come from tests/e2e/server/raw_http2.h;
// docs/security-probe.md lists every attack with the test that pins it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server/e2e_util.h"
#include "tests/e2e/server/raw_http2.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {
namespace {

using ::testing::HasSubstr;

// Resident memory an attack may leave behind: the HeapTrimmer's threshold (32 MiB of growth
// with as much free before it trims) and as much again for allocator caches and gRPC's arenas.
// Rapid reset left +398 MB before the trimmer, +10-25 MB with it (measured on loopback).
constexpr int64_t kMemorySlackKib = 64 * 1024;

const std::string kPath = "/flashserve.v1.Generation/GetModelInfo";

// Each attack meets a server of its own, so that its memory is judged against the baseline
// of that server: with one server for all four, the rapid reset's settled leftover (~+22 MB)
// and the CONTINUATION flood's parsing arena (up to 64 MiB a gRPC thread; docs/api.md "Known
// limit: CONTINUATION flood") added up past the bound in 4 of 17 runs on the build machine
// (2026-12-05), by 2-3 MB, and failed the next test as well. The rapid reset test still
// attacks one server twice: a repeated attack must not add up.
class Http2AbuseE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model = default_model_path();
    if (model.empty()) GTEST_SKIP() << "default model not in models/";
    auto server = ServerProcess::start(model, {"--max-num-seqs", "4"});
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_TRUE((*server)->wait_serving().ok()) << (*server)->log();
    server_ = std::move(*server);
    auto stub = server_->stub();
    for (int i = 0; i < 2; ++i) generate(stub.get(), greedy_request("Warm up", 4));
    baseline_kib_ = server_->rss_kib();
  }
  void TearDown() override {
    if (server_) {
      EXPECT_EQ(server_->stop(SIGTERM), 0) << server_->log();
    }
    server_.reset();
  }

  // The server still answers health and a generation, and its memory comes back near the
  // baseline (polled for `patience`: calls are freed asynchronously, and the server's
  // HeapTrimmer looks once a second).
  void expect_serving_and_memory_back(
      std::chrono::seconds patience = std::chrono::seconds(5)) {
    EXPECT_EQ(server_->health(), grpc::health::v1::HealthCheckResponse::SERVING);
    auto stub = server_->stub();
    v1::GenerateRequest still_there = greedy_request("Still there?", 2);
    still_there.mutable_stopping()->set_ignore_eos(true);  // two tokens whatever the model says
    const UnaryResult r = generate(stub.get(), still_there);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.response.token_ids_size(), 2);
    expect_rss_back(*server_, baseline_kib_, kMemorySlackKib, patience);
  }

  std::unique_ptr<ServerProcess> server_;
  int64_t baseline_kib_ = 0;
};

// CVE-2023-44487's pattern: open a stream, reset it at once, 20,000 times on one connection.
// The server keeps serving, and its memory comes back: the gRPC of Debian 12 (1.51.1, without
// the CVE's fix) frees the ~20 KB of call state per reset stream once it has worked through
// them, but glibc kept the freed pages (+400 MB after the attack, back to the baseline with
// malloc_trim) until the server's HeapTrimmer (server/api/heap_trimmer.h) gave them back.
// Before it this test failed: settled at +399 MB and +412 MB.
TEST_F(Http2AbuseE2E, RapidResetLeavesTheServerServing) {
  for (int attack = 0; attack < 2; ++attack) {  // a repeated attack must not add up either
    RawHttp2Connection connection(server_->grpc_port());
    ASSERT_TRUE(connection.ok());
    const std::string headers = grpc_request_headers(kPath, server_->target());
    int num_reset = 0;
    for (uint32_t i = 0; i < 20000; ++i) {
      const uint32_t stream = 1 + 2 * i;
      if (!connection.send(FrameType::kHeaders, kEndHeaders, stream, headers) ||
          !connection.send(FrameType::kRstStream, 0, stream, RawHttp2Connection::u32(kCancel))) {
        break;  // the server closed the connection: also a fine answer
      }
      ++num_reset;
    }
    // Once the server has parsed every frame, gRPC works through the reset streams: wait until
    // the memory settles (four readings 0.5 s apart within 2 MiB; 30 s at most), then check.
    EXPECT_TRUE(connection.ping_acked(std::chrono::seconds(20)));
    connection.close();
    int64_t peak = server_->rss_kib();
    std::vector<int64_t> readings = {peak};
    for (int i = 0; i < 60; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      readings.push_back(server_->rss_kib());
      peak = std::max(peak, readings.back());
      const auto last = readings.end() - std::min<size_t>(readings.size(), 4);
      const auto [low, high] = std::minmax_element(last, readings.end());
      if (readings.size() >= 4 && *high - *low < 2048) break;
    }
    std::printf("rapid reset %d: %d streams reset; RSS peak +%lld KiB, settled at +%lld KiB\n",
                attack, num_reset, static_cast<long long>(peak - baseline_kib_),
                static_cast<long long>(readings.back() - baseline_kib_));
    // Settled can still be before gRPC has freed every call; the trimmer follows within 1 s.
    expect_serving_and_memory_back(std::chrono::seconds(15));
  }
}

// One header block that never ends: a header value announced as 1 GiB and sent in
// CONTINUATION frames for 5 s (gRPC 1.51 reads it at 2-3 MB/s, keeping it). Then the client
// goes away; the server keeps serving meanwhile and its memory comes back.
TEST_F(Http2AbuseE2E, ContinuationFloodLeavesTheServerServing) {
  RawHttp2Connection connection(server_->grpc_port());
  ASSERT_TRUE(connection.ok());
  const std::string start = grpc_request_headers(kPath, server_->target()) +
                            std::string(1, '\0') + hpack_integer(7, 7) + "x-flood" +
                            hpack_integer(uint64_t{1} << 30, 7);
  ASSERT_TRUE(connection.send(FrameType::kHeaders, 0, 1, start));
  const std::string piece(16384, 'c');  // SETTINGS_MAX_FRAME_SIZE's default
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int64_t num_sent = 0;
  while (std::chrono::steady_clock::now() < give_up &&
         connection.send(FrameType::kContinuation, 0, 1, piece)) {
    num_sent += static_cast<int64_t>(piece.size());
  }
  std::printf("continuation flood: %lld KiB sent; RSS +%lld KiB\n",
              static_cast<long long>(num_sent >> 10),
              static_cast<long long>(server_->rss_kib() - baseline_kib_));
  // Other clients are served while the header block is still open.
  EXPECT_EQ(server_->health(), grpc::health::v1::HealthCheckResponse::SERVING);
  connection.close();
  expect_serving_and_memory_back();
}

// 20,000 SETTINGS frames, each of which the server must acknowledge.
TEST_F(Http2AbuseE2E, SettingsFloodLeavesTheServerServing) {
  RawHttp2Connection connection(server_->grpc_port());
  ASSERT_TRUE(connection.ok());
  // SETTINGS_INITIAL_WINDOW_SIZE (4) = 65535, the default: valid, changes nothing.
  const std::string setting = std::string("\x00\x04", 2) + RawHttp2Connection::u32(65535);
  int num_sent = 0;
  while (num_sent < 20000 && connection.send(FrameType::kSettings, 0, 0, setting)) ++num_sent;
  RecordProperty("settings_sent", num_sent);
  expect_serving_and_memory_back();
}

// Pings without data beyond the allowed rate: the third early one closes the connection with
// GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (docs/api.md, transport limits).
TEST_F(Http2AbuseE2E, PingFloodGetsGoawayTooManyPings) {
  RawHttp2Connection connection(server_->grpc_port());
  ASSERT_TRUE(connection.ok());
  for (int i = 0; i < 100 && connection.send(FrameType::kPing, 0, 0, std::string(8, 'p')); ++i) {
  }
  EXPECT_TRUE(connection.wait_closed(std::chrono::seconds(10)));
  ASSERT_TRUE(connection.got_goaway());
  const auto [code, debug] = connection.goaway();
  EXPECT_EQ(code, kEnhanceYourCalm);
  EXPECT_THAT(debug, HasSubstr("too_many_pings"));
  expect_serving_and_memory_back();
}

bool have_ipv6_loopback() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// The first line of the answer to GET /health over [::1]:port ("" when no connection).
std::string ipv6_http_health(int port) {
  const int fd = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_port = htons(static_cast<uint16_t>(port));
  addr.sin6_addr = in6addr_loopback;
  std::string answer;
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char chunk[4096];
    for (ssize_t n; (n = ::recv(fd, chunk, sizeof(chunk), 0)) > 0;) answer.append(chunk, n);
  }
  if (fd >= 0) ::close(fd);
  return answer.substr(0, answer.find("\r\n"));
}

TEST(Ipv6E2E, ServesOnAnIpv6Address) {
  const std::string model = default_model_path();
  if (model.empty()) GTEST_SKIP() << "default model not in models/";
  if (!have_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback (::1) on this machine";
  auto server = ServerProcess::start(model, {"--host", "::1"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->target().rfind("[::1]:", 0), 0u) << (*server)->target();
  ASSERT_TRUE((*server)->wait_serving().ok()) << (*server)->log();
  auto stub = (*server)->stub();
  const UnaryResult r = generate(stub.get(), greedy_request("Hello", 2));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_GT((*server)->http_port(), 0) << (*server)->log();  // the HTTP API on the same host
  EXPECT_EQ(ipv6_http_health((*server)->http_port()), "HTTP/1.1 200 OK");
  EXPECT_EQ((*server)->stop(SIGTERM), 0) << (*server)->log();
}

}  // namespace
}  // namespace flashserve::e2e
