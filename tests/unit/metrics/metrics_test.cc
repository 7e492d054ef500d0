#include "server/metrics/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace flashserve::metrics {
namespace {

using Clock = BandwidthWindow::Clock;

// The value of the sample line `series` (e.g. `flashserve_requests_total{status="stop"}`) in
// a text exposition, or nullopt when the series is absent.
std::optional<double> sample_value(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

double value_of(const std::string& text, const std::string& series) {
  auto v = sample_value(text, series);
  EXPECT_TRUE(v.has_value()) << "missing series " << series << " in\n" << text;
  return v.value_or(-1);
}

TEST(MetricsTest, EveryRequestStatusIsExportedFromTheStart) {
  Metrics m;
  const std::string text = m.serialize();
  for (const char* status :
       {"stop", "length", "stop_sequence", "cancelled", "deadline_exceeded", "internal",
        "invalid_argument", "capacity", "unavailable"}) {
    for (const char* api : {"grpc", "http"}) {
      EXPECT_EQ(value_of(text, std::string("flashserve_requests_total{api=\"") + api +
                                   "\",status=\"" + status + "\"}"),
                0);
    }
  }
  EXPECT_EQ(value_of(text, "flashserve_attention_kernel_bytes_total{phase=\"prefill\"}"), 0);
  EXPECT_EQ(value_of(text, "flashserve_attention_kernel_bytes_total{phase=\"decode\"}"), 0);
}

TEST(MetricsTest, RequestCountersAndHistograms) {
  Metrics m;
  m.record_request(RequestStatus::kStop, Api::kGrpc);
  m.record_request(RequestStatus::kStop, Api::kGrpc);
  m.record_request(RequestStatus::kCapacity, Api::kGrpc);
  m.record_request(RequestStatus::kStop, Api::kHttp);
  m.observe_time_to_first_token(0.004);   // bucket le=0.005
  m.observe_time_to_first_token(0.2);     // bucket le=0.25
  m.observe_inter_token_latencies({});  // nothing
  // le=0.001 (twice, one on the bound itself), le=0.0025, +Inf only.
  m.observe_inter_token_latencies({0.0009, 0.001, 0.002, 1e6});
  m.observe_queue_seconds(45.0);          // le=60
  m.observe_request_duration(900.0);      // only +Inf
  m.add_prompt_tokens(17);
  m.add_generated_tokens(5);
  m.add_generated_tokens(3);
  const std::string t = m.serialize();
  EXPECT_EQ(value_of(t, "flashserve_requests_total{api=\"grpc\",status=\"stop\"}"), 2);
  EXPECT_EQ(value_of(t, "flashserve_requests_total{api=\"http\",status=\"stop\"}"), 1);
  EXPECT_EQ(value_of(t, "flashserve_requests_total{api=\"grpc\",status=\"capacity\"}"), 1);
  EXPECT_EQ(value_of(t, "flashserve_requests_total{api=\"http\",status=\"capacity\"}"), 0);
  EXPECT_EQ(value_of(t, "flashserve_requests_total{api=\"grpc\",status=\"length\"}"), 0);
  EXPECT_EQ(value_of(t, "flashserve_time_to_first_token_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(value_of(t, "flashserve_time_to_first_token_seconds_sum"), 0.204);
  EXPECT_EQ(value_of(t, "flashserve_time_to_first_token_seconds_bucket{le=\"0.0025\"}"), 0);
  EXPECT_EQ(value_of(t, "flashserve_time_to_first_token_seconds_bucket{le=\"0.005\"}"), 1);
  EXPECT_EQ(value_of(t, "flashserve_time_to_first_token_seconds_bucket{le=\"0.1\"}"), 1);
  EXPECT_EQ(value_of(t, "flashserve_time_to_first_token_seconds_bucket{le=\"0.25\"}"), 2);
  EXPECT_EQ(value_of(t, "flashserve_inter_token_latency_seconds_bucket{le=\"0.001\"}"), 2);
  EXPECT_EQ(value_of(t, "flashserve_inter_token_latency_seconds_bucket{le=\"0.0025\"}"), 3);
  EXPECT_EQ(value_of(t, "flashserve_inter_token_latency_seconds_bucket{le=\"600\"}"), 3);
  EXPECT_EQ(value_of(t, "flashserve_inter_token_latency_seconds_count"), 4);
  EXPECT_DOUBLE_EQ(value_of(t, "flashserve_inter_token_latency_seconds_sum"), 0.0039 + 1e6);
  EXPECT_EQ(value_of(t, "flashserve_request_queue_seconds_bucket{le=\"30\"}"), 0);
  EXPECT_EQ(value_of(t, "flashserve_request_queue_seconds_bucket{le=\"60\"}"), 1);
  EXPECT_EQ(value_of(t, "flashserve_request_duration_seconds_bucket{le=\"600\"}"), 0);
  EXPECT_EQ(value_of(t, "flashserve_request_duration_seconds_bucket{le=\"+Inf\"}"), 1);
  EXPECT_EQ(value_of(t, "flashserve_prompt_tokens_total"), 17);
  EXPECT_EQ(value_of(t, "flashserve_generated_tokens_total"), 8);
}

// Refusals are told apart by their status code: client errors, overload, unavailability.
TEST(MetricsTest, RejectedStatusSplitsClientErrorsFromOverload) {
  EXPECT_EQ(rejected_status(absl::InvalidArgumentError("x")), RequestStatus::kInvalidArgument);
  EXPECT_EQ(rejected_status(absl::OutOfRangeError("x")), RequestStatus::kInvalidArgument);
  EXPECT_EQ(rejected_status(absl::ResourceExhaustedError("x")), RequestStatus::kCapacity);
  EXPECT_EQ(rejected_status(absl::UnavailableError("x")), RequestStatus::kUnavailable);
  EXPECT_EQ(rejected_status(absl::InternalError("x")), RequestStatus::kInternal);
  for (int i = 0; i < kNumRequestStatuses; ++i) {
    EXPECT_NE(request_status_label(static_cast<RequestStatus>(i)), "unknown");
  }
}

// Latency buckets reach ten minutes, so slow CPU generations still have a finite p99.
TEST(MetricsTest, LatencyBucketsReachTenMinutes) {
  Metrics m;
  m.observe_request_duration(599.0);
  const std::string t = m.serialize();
  EXPECT_EQ(value_of(t, "flashserve_request_duration_seconds_bucket{le=\"300\"}"), 0);
  EXPECT_EQ(value_of(t, "flashserve_request_duration_seconds_bucket{le=\"600\"}"), 1);
}

TEST(MetricsTest, BuildInfoAndTheModelLabelOnEveryMetric) {
  Metrics m({.version = "1.2.3", .commit = "abc123", .device = "cpu", .model = "tiny"});
  const std::string t = m.serialize();
  // Constant labels (model) come first in the exposition.
  EXPECT_EQ(value_of(t, "flashserve_build_info{model=\"tiny\",commit=\"abc123\",device=\"cpu\","
                        "version=\"1.2.3\"}"),
            1);
  EXPECT_EQ(value_of(t, "flashserve_requests_total{model=\"tiny\",api=\"grpc\",status=\"stop\"}"), 0);
  // Every sample line carries the model label.
  std::istringstream in(t);
  std::string line;
  int num_samples = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++num_samples;
    EXPECT_NE(line.find("model=\"tiny\""), std::string::npos) << line;
  }
  EXPECT_GT(num_samples, 50);
  // The device label follows the loader's answer; the old series goes.
  m.set_device("cuda");
  const std::string after = m.serialize();
  EXPECT_EQ(value_of(after, "flashserve_build_info{model=\"tiny\",commit=\"abc123\","
                            "device=\"cuda\",version=\"1.2.3\"}"),
            1);
  EXPECT_EQ(after.find("device=\"cpu\""), std::string::npos);
  // Without a model name there is no model label, and build_info says "unknown".
  const std::string plain = Metrics().serialize();
  EXPECT_EQ(value_of(plain, "flashserve_build_info{commit=\"unknown\",device=\"unknown\","
                            "version=\"unknown\"}"),
            1);
}

TEST(MetricsTest, ForwardTimeBreakdownByPart) {
  Metrics m;
  m.record_step_breakdown(0.5, 1.25, 0.25);
  m.record_step_breakdown(0.5, 0.75, -1);  // negative: ignored
  const std::string t = m.serialize();
  EXPECT_DOUBLE_EQ(value_of(t, "flashserve_forward_seconds_total{part=\"attention\"}"), 1.0);
  EXPECT_DOUBLE_EQ(value_of(t, "flashserve_forward_seconds_total{part=\"gemm\"}"), 2.0);
  EXPECT_DOUBLE_EQ(value_of(t, "flashserve_forward_seconds_total{part=\"other\"}"), 0.25);
}

TEST(MetricsTest, EngineGaugesAndStepHistograms) {
  Metrics m;
  m.set_num_running(3);
  m.set_num_waiting(7);
  m.set_kv_blocks(12, 100);
  m.set_waiting_capacity(256);
  m.record_step(/*num_seqs=*/3, /*num_tokens=*/130, /*seconds=*/0.02);
  m.record_step(/*num_seqs=*/1, /*num_tokens=*/1, /*seconds=*/0.01);
  m.add_preemptions(2);
  m.add_preemptions(0);
  m.set_num_running(2);
  const std::string t = m.serialize();
  EXPECT_EQ(value_of(t, "flashserve_requests_running"), 2);
  EXPECT_EQ(value_of(t, "flashserve_requests_waiting"), 7);
  EXPECT_EQ(value_of(t, "flashserve_requests_waiting_capacity"), 256);
  EXPECT_EQ(value_of(t, "flashserve_kv_cache_blocks_used"), 12);
  EXPECT_EQ(value_of(t, "flashserve_kv_cache_blocks_capacity"), 100);
  EXPECT_EQ(value_of(t, "flashserve_engine_steps_total"), 2);
  EXPECT_EQ(value_of(t, "flashserve_engine_preemptions_total"), 2);
  EXPECT_EQ(value_of(t, "flashserve_engine_step_seconds_count"), 2);
  // Only the one-token-a-sequence step is a decode step: 3 sequences of 130 tokens had a prompt.
  EXPECT_EQ(value_of(t, "flashserve_engine_decode_step_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(value_of(t, "flashserve_engine_decode_step_seconds_sum"), 0.01);
  EXPECT_EQ(value_of(t, "flashserve_engine_decode_step_seconds_bucket{le=\"0.0075\"}"), 0);
  EXPECT_EQ(value_of(t, "flashserve_engine_decode_step_seconds_bucket{le=\"0.01\"}"), 1);
  EXPECT_EQ(value_of(t, "flashserve_batch_sequences_sum"), 4);
  EXPECT_EQ(value_of(t, "flashserve_batch_sequences_bucket{le=\"2\"}"), 1);
  EXPECT_EQ(value_of(t, "flashserve_batch_sequences_bucket{le=\"4\"}"), 2);
  EXPECT_EQ(value_of(t, "flashserve_batch_tokens_sum"), 131);
  EXPECT_EQ(value_of(t, "flashserve_batch_tokens_bucket{le=\"128\"}"), 1);
  EXPECT_EQ(value_of(t, "flashserve_batch_tokens_bucket{le=\"256\"}"), 2);
}

TEST(MetricsTest, PrefixCacheCountersAddDeltasAndTheGaugeIsSet) {
  Metrics m;
  m.record_prefix_cache(/*num_queried_tokens=*/100, /*num_hit_tokens=*/64, /*num_evictions=*/0,
                        /*num_cached_blocks=*/5);
  m.record_prefix_cache(50, 0, 3, 2);
  const std::string t = m.serialize();
  EXPECT_EQ(value_of(t, "flashserve_prefix_cache_queried_tokens_total"), 150);
  EXPECT_EQ(value_of(t, "flashserve_prefix_cache_hit_tokens_total"), 64);
  EXPECT_EQ(value_of(t, "flashserve_prefix_cache_evictions_total"), 3);
  EXPECT_EQ(value_of(t, "flashserve_prefix_cache_blocks"), 2);
}

TEST(MetricsTest, AttentionKernelMetricsPerPhase) {
  Metrics m;
  const Clock::time_point t0 = Clock::now();
  // 30 prefill launches of 2 ms each moving 3 MB in all: 1.5 GB/s.
  m.record_attention(AttentionPhase::kPrefill, 30, 0.06, 3e6, 9e9, t0);
  // 30 decode launches of 100 us each: 1.2 MB in 3 ms -> 400 MB/s.
  m.record_attention(AttentionPhase::kDecode, 30, 0.003, 1.2e6, 1e6, t0);
  m.record_attention(AttentionPhase::kDecode, 0, 0, 0, 0, t0);  // no launches: ignored
  const std::string t = m.serialize();
  EXPECT_EQ(value_of(t, "flashserve_attention_kernel_seconds_count{phase=\"prefill\"}"), 30);
  EXPECT_DOUBLE_EQ(value_of(t, "flashserve_attention_kernel_seconds_sum{phase=\"prefill\"}"),
                   0.06);
  EXPECT_EQ(value_of(t, "flashserve_attention_kernel_seconds_bucket{phase=\"prefill\","
                        "le=\"0.001\"}"),
            0);
  EXPECT_EQ(value_of(t, "flashserve_attention_kernel_seconds_bucket{phase=\"prefill\","
                        "le=\"0.0025\"}"),
            30);
  EXPECT_EQ(value_of(t, "flashserve_attention_kernel_seconds_bucket{phase=\"decode\","
                        "le=\"0.0001\"}"),
            30);
  EXPECT_EQ(value_of(t, "flashserve_attention_kernel_seconds_count{phase=\"decode\"}"), 30);
  EXPECT_EQ(value_of(t, "flashserve_attention_kernel_bytes_total{phase=\"prefill\"}"), 3e6);
  EXPECT_EQ(value_of(t, "flashserve_attention_kernel_flops_total{phase=\"prefill\"}"), 9e9);
  EXPECT_EQ(value_of(t, "flashserve_attention_kernel_flops_total{phase=\"decode\"}"), 1e6);
  EXPECT_DOUBLE_EQ(
      value_of(t, "flashserve_attention_kernel_bandwidth_bytes_per_second{phase=\"prefill\"}"),
      5e7);
  EXPECT_DOUBLE_EQ(
      value_of(t, "flashserve_attention_kernel_bandwidth_bytes_per_second{phase=\"decode\"}"),
      4e8);
}

TEST(BandwidthWindowTest, OnlyTheLastWindowCounts) {
  BandwidthWindow w(std::chrono::seconds(1));
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(w.bytes_per_second(), 0);
  w.add(t0, 100, 1.0);
  EXPECT_DOUBLE_EQ(w.bytes_per_second(), 100);
  w.add(t0 + std::chrono::milliseconds(500), 300, 1.0);
  EXPECT_DOUBLE_EQ(w.bytes_per_second(), 200);  // (100 + 300) / 2
  w.add(t0 + std::chrono::milliseconds(1200), 1000, 0.5);  // t0's sample leaves the window
  EXPECT_DOUBLE_EQ(w.bytes_per_second(), 1300 / 1.5);
  w.add(t0 + std::chrono::seconds(5), 10, 1.0);  // everything older is gone
  EXPECT_DOUBLE_EQ(w.bytes_per_second(), 10);
}

// Every family has HELP and TYPE lines and the names follow the Prometheus conventions we
// hold to: flashserve_ prefix, counters end in _total and nothing else does.
TEST(MetricsTest, NamesFollowConventions) {
  Metrics m;
  std::istringstream in(m.serialize());
  std::string line;
  int num_families = 0;
  std::string last_help;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      last_help = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_GT(line.size(), 7 + last_help.size() + 10) << "help text too short: " << line;
      continue;
    }
    if (line.rfind("# TYPE ", 0) != 0) continue;
    std::istringstream fields(line.substr(7));
    std::string name, type;
    fields >> name >> type;
    ++num_families;
    EXPECT_EQ(name, last_help) << "TYPE without HELP";
    EXPECT_EQ(name.rfind("flashserve_", 0), 0u) << name;
    const bool ends_total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(ends_total, type == "counter") << name << " is a " << type;
  }
  EXPECT_EQ(num_families, 29);  // 23 + four prefix-cache families + auth failures + decode steps
}

// The text passes `promtool check metrics` (skipped where promtool is not installed).
TEST(MetricsTest, PromtoolCheckMetricsIsClean) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool not installed (Debian package 'prometheus')";
  }
  Metrics m;
  m.record_attention(AttentionPhase::kDecode, 2, 0.001, 1e6, 1e6, Clock::now());
  const std::string path = testing::TempDir() + "/flashserve_metrics.txt";
  std::ofstream(path) << m.serialize();
  const std::string cmd = "promtool check metrics < " + path + " > " + path + ".out 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream out_file(path + ".out");
  std::stringstream out;
  out << out_file.rdbuf();
  EXPECT_EQ(rc, 0) << out.str();
  EXPECT_EQ(out.str(), "") << "promtool lint findings";
}

// A minimal HTTP/1.0 GET against 127.0.0.1:port; returns the whole response.
std::string http_get(int port, const std::string& path, const std::string& method = "GET") {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = method + " " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
    }
  }
  close(fd);
  return response;
}

TEST(MetricsTest, ServesTheRegistryOverHttp) {
  Metrics m;
  EXPECT_EQ(m.listening_port(), 0);
  ASSERT_TRUE(m.serve("127.0.0.1:0").ok());
  const int port = m.listening_port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(m.serve("127.0.0.1:0").code(), absl::StatusCode::kFailedPrecondition);
  m.record_request(RequestStatus::kLength, Api::kGrpc);
  const std::string response = http_get(port, "/metrics");
  EXPECT_NE(response.find("200 OK"), std::string::npos) << response;
  EXPECT_NE(response.find("flashserve_requests_total{api=\"grpc\",status=\"length\"} 1"), std::string::npos)
      << response;
}

std::string http_request(int port, const std::string& method, const std::string& path) {
  return http_get(port, path, method);
}

TEST(MetricsTest, HttpEndpointAnswersOtherPathsAndMethodsWithErrors) {
  Metrics m;
  ASSERT_TRUE(m.serve("127.0.0.1:0").ok());
  const int port = m.listening_port();
  EXPECT_EQ(http_request(port, "GET", "/nope").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(http_request(port, "POST", "/metrics").rfind("HTTP/1.1 405", 0), 0u);
  const std::string head = http_request(port, "HEAD", "/metrics");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(head.find("flashserve_requests_total"), std::string::npos) << "HEAD has no body";
  // A query string is ignored, and the endpoint keeps serving after errors.
  EXPECT_NE(http_get(port, "/metrics?x=1").find("flashserve_engine_steps_total"), std::string::npos);
}

TEST(MetricsTest, ServeReportsAnUnusableAddress) {
  Metrics m;
  absl::Status s = m.serve("256.1.1.1:99999");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("256.1.1.1:99999"), std::string::npos) << s;
}

}  // namespace
}  // namespace flashserve::metrics
