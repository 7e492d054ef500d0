// End-to-end abuse of the gRPC port (issue 23, item 6), each bounded and on loopback, each
// ending with the server still serving (health SERVING, a generation succeeds) and its
// resident memory back near the baseline measured before: HTTP/2 rapid reset (streams reset
// as soon as they are opened; memory: see the test), a SETTINGS flood, a ping flood (GOAWAY
// ENHANCE_YOUR_CALM "too_many_pings"), and an IPv6 listen address. The frames come from
// tests/e2e/server/raw_http2.h.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server/e2e_util.h"
#include "tests/e2e/server/raw_http2.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {
namespace {

using ::testing::HasSubstr;

// Resident memory an attack may leave behind (allocator caches, gRPC's arenas).
constexpr int64_t kMemorySlackKib = 64 * 1024;

const std::string kPath = "/flashserve.v1.Generation/GetModelInfo";

class Http2AbuseE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string model = default_model_path();
    if (model.empty()) return;
    auto server = ServerProcess::start(model, {"--max-num-seqs", "4"});
    if (!server.ok() || !(*server)->wait_serving().ok()) return;
    server_ = std::move(*server);
    auto stub = server_->stub();
    for (int i = 0; i < 2; ++i) generate(stub.get(), greedy_request("Warm up", 4));
    baseline_kib_ = server_->rss_kib();
  }
  static void TearDownTestSuite() {
    if (server_) EXPECT_EQ(server_->stop(SIGTERM), 0) << server_->log();
    server_.reset();
  }
  void SetUp() override {
    if (server_ == nullptr) GTEST_SKIP() << "default model not in models/ (or no server)";
  }

  // The server still answers health and a generation, and its memory comes back near the
  // baseline (polled for a few seconds: calls are freed asynchronously).
  static void expect_serving_and_memory_back() {
    EXPECT_EQ(server_->health(), grpc::health::v1::HealthCheckResponse::SERVING);
    auto stub = server_->stub();
    v1::GenerateRequest still_there = greedy_request("Still there?", 2);
    still_there.mutable_stopping()->set_ignore_eos(true);  // two tokens whatever the model says
    const UnaryResult r = generate(stub.get(), still_there);
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.response.token_ids_size(), 2);
    int64_t rss = server_->rss_kib();
    for (int i = 0; i < 50 && rss > baseline_kib_ + kMemorySlackKib; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      rss = server_->rss_kib();
    }
    EXPECT_LE(rss, baseline_kib_ + kMemorySlackKib) << "baseline " << baseline_kib_ << " KiB";
  }

  static std::unique_ptr<ServerProcess> server_;
  static int64_t baseline_kib_;
};

std::unique_ptr<ServerProcess> Http2AbuseE2E::server_;
int64_t Http2AbuseE2E::baseline_kib_ = 0;

// CVE-2023-44487's pattern: open a stream, reset it at once, 20,000 times on one connection.
// The server keeps serving. Its memory does NOT come back: the gRPC of Debian 12 (1.51.1,
// without the CVE's fix) keeps ~17-20 KB of resident memory per reset stream, and repeated
// attacks add to it (docs/api.md, transport limits): the growth is recorded, not asserted,
// until the server is built with a gRPC that has the fix (>= 1.56.3 / 1.57.1).
TEST_F(Http2AbuseE2E, RapidResetLeavesTheServerServing) {
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
  RecordProperty("streams_reset", num_reset);
  EXPECT_EQ(server_->health(), grpc::health::v1::HealthCheckResponse::SERVING);
  auto stub = server_->stub();
  const UnaryResult r = generate(stub.get(), greedy_request("Still there?", 2));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  // gRPC works through the reset streams after the last frame: wait until the memory settles
  // (two readings a second apart within 1 MiB; 20 s at most).
  int64_t rss = server_->rss_kib();
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const int64_t now = server_->rss_kib();
    const bool settled = now - rss < 1024;
    rss = now;
    if (settled) break;
  }
  const int64_t growth_kib = rss - baseline_kib_;
  RecordProperty("rss_growth_kib", static_cast<int>(growth_kib));
  std::printf("rapid reset: %d streams reset; RSS +%lld KiB (not returned: gRPC 1.51)\n",
              num_reset, static_cast<long long>(growth_kib));
  baseline_kib_ = rss;  // the later tests measure from here
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
  EXPECT_EQ((*server)->stop(SIGTERM), 0) << (*server)->log();
}

}  // namespace
}  // namespace flashserve::e2e
