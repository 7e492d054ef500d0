// End-to-end hardening (issue 10): flags that cannot serve are refused at start (defect 7);
// shutdown has a hard limit after which what remains fails with UNAVAILABLE and the process
// exits (defect 6); malformed protobuf on the wire gets INVALID_ARGUMENT (defect 4).
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "gmock/gmock.h"
#include "grpcpp/impl/client_unary_call.h"
#include "gtest/gtest.h"
#include "tests/e2e/server/e2e_util.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {
namespace {

using ::testing::HasSubstr;

CommandResult run_server(const std::string& args) {
  return run_command(server_binary() + " " + args + " 2>&1");
}

// No model is needed: these are refused before anything starts.
TEST(HardeningE2E, FlagsThatCannotServeAreRefusedAtStart) {
  const std::string base =
      "--model /nonexistent/model.gguf --port 0 --metrics-port -1 --http-port -1 ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--max-context 1", "--max-context 1 must be 0"},
      {"--max-waiting 0", "--max-waiting 0 must be >= 1"},
      {"--drain-timeout -1", "--drain-timeout -1 s must be in [0"},
      {"--drain-timeout nan", "--drain-timeout"},
      {"--max-num-seqs 0", "--max-num-seqs 0"},
      {"--port 65536", "--port 65536 is not a port"},
      {"--http-port 65536", "--http-port 65536 is not a port"},
      {"--tls-cert /etc/hostname", "--tls-cert is given without --tls-key"},
      {"--auth-token-file /nonexistent/tokens", "--auth-token-file '/nonexistent/tokens'"},
  };
  for (const auto& [flags, message] : cases) {
    const CommandResult run = run_server(base + flags);
    EXPECT_EQ(run.exit_code, 2) << flags << ": " << run.out;
    EXPECT_THAT(run.out, HasSubstr(message)) << flags;
  }
}

class HardeningModelE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = default_model_path();
    if (model_.empty()) GTEST_SKIP() << "default model not in models/";
  }
  std::string model_;
};

// Issue 23, item 2: memory budgets past what the machine has are refused at start, before
// anything is allocated, with exit code 2 and a message naming the flag, the request and what
// is available; never std::bad_alloc (which ended the process with 134) nor the OOM killer.
TEST_F(HardeningModelE2E, ImpossibleMemoryBudgetsAreRefusedAtStart) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t total_kib = 0;
  while (meminfo >> key && key != "MemTotal:") meminfo.ignore(256, '\n');
  ASSERT_TRUE(meminfo >> total_kib);
  const std::string twice_the_ram = std::to_string(total_kib * 2 / 1024);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--kv-cache-mb 100000000", "--kv-cache-mb 100000000 asks for"},
      {"--kv-cache-tokens 2000000000", "--kv-cache-tokens 2000000000 asks for"},
      {"--kv-cache-mb 2147483647", "--kv-cache-mb 2147483647 asks for"},
      {"--kv-cache-mb " + twice_the_ram, "--kv-cache-mb " + twice_the_ram + " asks for"},
      {"--max-batch-tokens 2000000000", "--max-batch-tokens 2000000000 and --max-num-seqs 64: "
                                        "the CPU step workspace takes"},
  };
  for (const auto& [flags, message] : cases) {
    const CommandResult run = run_server("--model " + model_ +
                                         " --device cpu --port 0 --metrics-port -1 " + flags);
    EXPECT_EQ(run.exit_code, 2) << flags << ": " << run.out;
    EXPECT_THAT(run.out, HasSubstr(message)) << flags;
    EXPECT_THAT(run.out, HasSubstr("MiB available")) << flags;
    EXPECT_THAT(run.out, ::testing::Not(HasSubstr("bad_alloc"))) << flags;
  }
}

// Defect 6: with --drain-timeout 1, three long requests (one running, two waiting) do not keep
// the process alive: after the limit they fail with UNAVAILABLE naming it, and it exits 0.
TEST_F(HardeningModelE2E, DrainLimitFailsWhatRemainsAndExits) {
  auto server = ServerProcess::start(model_, {"--max-num-seqs", "1", "--drain-timeout", "1"});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->wait_serving().ok());
  auto stub = (*server)->stub();
  v1::GenerateRequest request = greedy_request("Tell me a very long story about the sea.", 2000);
  request.mutable_stopping()->set_ignore_eos(true);
  constexpr int kStreams = 3;
  std::vector<StreamResult> results(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] { results[i] = generate_stream(stub.get(), request); });
  }
  bool admitted = false;  // one running, two waiting
  for (int i = 0; i < 1000 && !admitted; ++i) {
    const v1::ModelInfo info = model_info(stub.get());
    admitted = info.engine().num_running() == 1 && info.engine().num_waiting() == 2;
    if (!admitted) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(admitted);
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_EQ((*server)->stop(SIGTERM, std::chrono::seconds(60)), 0) << (*server)->log();
  const auto took = std::chrono::steady_clock::now() - begin;
  // The limit plus at most one engine step and the delivery grace; far below the ~minute
  // the three requests would take.
  EXPECT_LT(took, std::chrono::seconds(8));
  for (auto& client : clients) client.join();
  for (const StreamResult& r : results) {
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
    EXPECT_THAT(r.status.error_message(), HasSubstr("drain limit of 1s"));
  }
  EXPECT_THAT((*server)->log(), HasSubstr("drain limit of 1000 ms passed"));
}

// Defect 4 over the real binary: bytes that are not a GenerateRequest.
TEST_F(HardeningModelE2E, MalformedProtobufIsInvalidArgument) {
  auto server = ServerProcess::start(model_, {});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->wait_serving().ok());
  const std::string bad_utf8("\x0a\x02\xc3\x28", 4);
  grpc::Slice slice(bad_utf8);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  auto context = context_with_timeout(std::chrono::seconds(30));
  const grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      (*server)->channel().get(),
      grpc::internal::RpcMethod("/flashserve.v1.Generation/Generate",
                                grpc::internal::RpcMethod::NORMAL_RPC),
      context.get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("UTF-8"));
  EXPECT_EQ((*server)->stop(SIGTERM), 0);
  EXPECT_THAT((*server)->log(), HasSubstr("malformed request from"));
  EXPECT_THAT((*server)->log(), ::testing::Not(HasSubstr("[libprotobuf ERROR")));
}

}  // namespace
}  // namespace flashserve::e2e
