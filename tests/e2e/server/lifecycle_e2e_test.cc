// End-to-end: server life cycle (health while starting, SERVING, NOT_SERVING while draining,
// health Watch streams ended at shutdown, clean exit on SIGTERM) and overload
// (RESOURCE_EXHAUSTED at once when the waiting queue is full). Each test starts its own server
// process. Skipped without the model file.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "grpcpp/impl/client_unary_call.h"
#include "gtest/gtest.h"
#include "kernels/device.h"
#include "tests/e2e/server/e2e_util.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {
namespace {

using Health = grpc::health::v1::HealthCheckResponse;

// A grpc.health.v1.Health/Watch("") stream read on its own thread.
struct HealthWatchLog {
  grpc::ClientContext context;
  std::vector<Health::ServingStatus> seen;  // every message, in order; read after join()
  grpc::Status status;                      // how the stream ended
  std::atomic<int> num_received{0};         // may be polled while reading
  std::thread reader;

  // Reads until the stream ends or, with `until_serving`, until the first SERVING (then
  // cancels the call).
  void start(const std::shared_ptr<grpc::Channel>& channel, bool until_serving) {
    context.set_deadline(std::chrono::system_clock::now() + kRpcTimeout);
    reader = std::thread([this, channel, until_serving] {
      auto stub = grpc::health::v1::Health::NewStub(channel);
      auto stream = stub->Watch(&context, grpc::health::v1::HealthCheckRequest());
      Health message;
      while (stream->Read(&message)) {
        seen.push_back(message.status());
        num_received.fetch_add(1);
        if (until_serving && message.status() == Health::SERVING) context.TryCancel();
      }
      status = stream->Finish();
    });
  }
  void join() {
    if (reader.joinable()) reader.join();
  }
  ~HealthWatchLog() {
    context.TryCancel();
    join();
  }
};

class LifecycleE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = default_model_path();
    if (model_.empty()) GTEST_SKIP() << "default model not in models/";
  }
  void TearDown() override {
    if (HasFailure() && server_) std::cerr << "---- server log ----\n" << server_->log() << "\n";
  }
  void start(const std::vector<std::string>& args) {
    auto server = ServerProcess::start(model_, args);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  std::string model_;
  std::unique_ptr<ServerProcess> server_;
};

// The model "file" is a FIFO that nobody writes to yet: loading blocks in open() for as long
// as the test wants, so, deterministically, the very first health answer and every one while
// loading is NOT_SERVING, a Watch starts with NOT_SERVING, unknown services are NOT_FOUND and
// Generation is UNAVAILABLE. Opening the FIFO's write end lets the load fail (not a regular
// file); the server exits 1 by itself, and its shutdown ends the Watch stream.
TEST_F(LifecycleE2E, HealthIsNotServingFromTheFirstAnswerWhileLoading) {
  char dir[] = "/tmp/flashserve-e2e-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/model.gguf";
  struct Cleanup {
    std::string dir, fifo;
    ~Cleanup() {
      ::unlink(fifo.c_str());
      ::rmdir(dir.c_str());
    }
  } cleanup{dir, fifo};
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  model_ = fifo;
  ASSERT_NO_FATAL_FAILURE(start({}));

  grpc::Status rpc;
  EXPECT_EQ(server_->health(&rpc), Health::NOT_SERVING);  // the very first answer
  ASSERT_TRUE(rpc.ok()) << rpc.error_message();
  auto health = grpc::health::v1::Health::NewStub(server_->channel());
  auto check = [&](const std::string& service, Health* response) {
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    auto context = context_with_timeout(std::chrono::seconds(10));
    return health->Check(context.get(), request, response);
  };
  Health response;
  ASSERT_TRUE(check("flashserve.v1.Generation", &response).ok());
  EXPECT_EQ(response.status(), Health::NOT_SERVING);
  EXPECT_EQ(check("flashserve.v1.Nope", &response).error_code(), grpc::StatusCode::NOT_FOUND);
  const UnaryResult r =
      generate(server_->stub().get(), greedy_request("Hi", 1), std::chrono::seconds(30));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();

  HealthWatchLog watch;
  watch.start(server_->channel(), /*until_serving=*/false);
  for (int i = 0; i < 6000 && watch.num_received.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(watch.num_received.load(), 0);
  EXPECT_EQ(server_->health(), Health::NOT_SERVING);  // still loading

  // Unblock the loader: a writer appears and leaves at once.
  int fd = -1;
  for (int i = 0; i < 6000 && fd < 0; ++i) {
    fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // ENXIO until it reads
    if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(fd, 0);
  ::close(fd);
  for (int i = 0; i < 6000 && server_->running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->stop(SIGKILL), 1);  // exited by itself with 1 (load failed)
  EXPECT_THAT(server_->log(), ::testing::HasSubstr("is not a regular file"));
  watch.join();
  EXPECT_THAT(watch.seen, ::testing::ElementsAre(Health::NOT_SERVING));
  EXPECT_EQ(watch.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(watch.status.error_message(), ::testing::HasSubstr("shutting down"));
}

// Health is never SERVING before the model is loaded: every answer before the first SERVING
// is NOT_SERVING, and Generation answers UNAVAILABLE while not serving. (Whether any answer
// lands before loading ends is up to timing, so the first answer is not required to be
// NOT_SERVING; the status is NOT_SERVING from before the port is bound, see health_test.cc.)
// A Watch opened at once sees NOT_SERVING then SERVING, or only SERVING: no repeats.
TEST_F(LifecycleE2E, HealthTurnsServingOnlyAfterLoading) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  HealthWatchLog watch;
  watch.start(server_->channel(), /*until_serving=*/true);
  auto stub = server_->stub();
  std::vector<Health::ServingStatus> seen;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool saw_unavailable_generation = false;
  while (std::chrono::steady_clock::now() < give_up) {
    grpc::Status rpc;
    const Health::ServingStatus status = server_->health(&rpc);
    ASSERT_TRUE(rpc.ok()) << rpc.error_message();
    seen.push_back(status);
    if (status == Health::SERVING) break;
    const UnaryResult r = generate(stub.get(), greedy_request("Hi", 1), std::chrono::seconds(30));
    if (r.status.error_code() == grpc::StatusCode::UNAVAILABLE) saw_unavailable_generation = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), Health::SERVING);
  for (size_t i = 0; i + 1 < seen.size(); ++i) EXPECT_EQ(seen[i], Health::NOT_SERVING) << i;
  std::cerr << "health answers before SERVING: " << seen.size() - 1
            << (saw_unavailable_generation ? " (Generate answered UNAVAILABLE meanwhile)" : "")
            << "\n";
  // The service-specific status agrees.
  auto health = grpc::health::v1::Health::NewStub(server_->channel());
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("flashserve.v1.Generation");
  grpc::health::v1::HealthCheckResponse response;
  auto context = context_with_timeout(std::chrono::seconds(10));
  ASSERT_TRUE(health->Check(context.get(), request, &response).ok());
  EXPECT_EQ(response.status(), Health::SERVING);
  watch.join();
  ASSERT_FALSE(watch.seen.empty()) << watch.status.error_message();
  EXPECT_EQ(watch.seen.back(), Health::SERVING);
  if (watch.seen.size() > 1) {
    EXPECT_EQ(watch.seen[0], Health::NOT_SERVING);
  }
  EXPECT_LE(watch.seen.size(), 2u);
  EXPECT_EQ(watch.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(server_->stop(SIGINT), 0);
}

// SIGTERM: health goes NOT_SERVING at once, admitted requests still finish completely, new
// ones are refused with UNAVAILABLE, an open health Watch gets NOT_SERVING and is ended by the
// server (UNAVAILABLE; had shutdown waited for it, the drain deadline would have cancelled
// it), and the process exits 0.
TEST_F(LifecycleE2E, SigtermDrainsThenExits) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  ASSERT_TRUE(server_->wait_serving().ok());
  HealthWatchLog watch;
  watch.start(server_->channel(), /*until_serving=*/false);
  auto stub = server_->stub();
  constexpr int kNewTokens = 48;
  v1::GenerateRequest request = greedy_request("Write a poem about autumn leaves.", kNewTokens);
  request.mutable_stopping()->set_ignore_eos(true);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kRpcTimeout);
  auto reader = stub->GenerateStream(&context, request);
  v1::GenerateStreamResponse message;
  ASSERT_TRUE(reader->Read(&message));  // the request is admitted and running
  int num_tokens = message.token_ids_size();

  std::thread terminator([&] { EXPECT_EQ(server_->stop(SIGTERM, std::chrono::seconds(180)), 0); });
  // NOT_SERVING while the stream is still being served.
  bool saw_not_serving = false;
  for (int i = 0; i < 200 && !saw_not_serving; ++i) {
    grpc::Status rpc;
    saw_not_serving = server_->health(&rpc) == Health::NOT_SERVING;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(saw_not_serving);
  // Liveness stays SERVING while draining: a liveness probe must not kill a draining server.
  {
    auto health = grpc::health::v1::Health::NewStub(server_->channel());
    grpc::health::v1::HealthCheckRequest live;
    live.set_service("liveness");
    Health response;
    grpc::ClientContext live_context;
    live_context.set_deadline(std::chrono::system_clock::now() + kRpcTimeout);
    ASSERT_TRUE(health->Check(&live_context, live, &response).ok());
    EXPECT_EQ(response.status(), Health::SERVING);
  }
  // New work is refused while draining.
  const UnaryResult refused =
      generate(server_->stub().get(), greedy_request("Hi", 2), std::chrono::seconds(30));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << refused.status.error_message();

  bool have_final = false;
  while (reader->Read(&message)) {
    num_tokens += message.token_ids_size();
    if (message.has_final()) {
      have_final = true;
      EXPECT_EQ(message.final().finish_reason(), v1::FINISH_REASON_LENGTH);
    }
  }
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(have_final);
  EXPECT_EQ(num_tokens, kNewTokens);
  terminator.join();
  watch.join();
  EXPECT_THAT(watch.seen, ::testing::ElementsAre(Health::SERVING, Health::NOT_SERVING));
  EXPECT_EQ(watch.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(watch.status.error_message(), ::testing::HasSubstr("shutting down"));
}

// With one running slot and one waiting slot taken, the next request is refused at once with
// RESOURCE_EXHAUSTED (it is not queued), and the refusal is counted.
TEST_F(LifecycleE2E, FullQueueIsResourceExhaustedAtOnce) {
  ASSERT_NO_FATAL_FAILURE(start({"--max-num-seqs", "1", "--max-waiting", "1"}));
  ASSERT_TRUE(server_->wait_serving().ok());
  auto stub = server_->stub();
  v1::GenerateRequest long_request = greedy_request("Describe the ocean in detail.", 300);
  long_request.mutable_stopping()->set_ignore_eos(true);

  grpc::ClientContext running_context;
  auto running = stub->GenerateStream(&running_context, long_request);
  v1::GenerateStreamResponse message;
  ASSERT_TRUE(running->Read(&message));  // admitted and running
  grpc::ClientContext waiting_context;
  auto waiting = stub->GenerateStream(&waiting_context, long_request);
  // Wait until the second one is queued.
  bool queued = false;
  for (int i = 0; i < 500 && !queued; ++i) {
    queued = model_info(stub.get()).engine().num_waiting() == 1;
    if (!queued) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(queued);

  const UnaryResult refused = generate(stub.get(), greedy_request("Hi", 2));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << refused.status.error_message();
  const StreamResult refused_stream = generate_stream(stub.get(), greedy_request("Hi", 2));
  EXPECT_EQ(refused_stream.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // "At once": refused while the running request has not finished and the queue is intact.
  const v1::ModelInfo info = model_info(stub.get());
  EXPECT_EQ(info.engine().num_running(), 1);
  EXPECT_EQ(info.engine().num_waiting(), 1);

  running_context.TryCancel();
  waiting_context.TryCancel();
  while (running->Read(&message)) {
  }
  while (waiting->Read(&message)) {
  }
  EXPECT_EQ(running->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(waiting->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(wait_idle(stub.get()));

  const auto metrics = server_->scrape_metrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metric_value(*metrics, "flashserve_requests_total", "api=\"grpc\",status=\"capacity\"").value_or(-1),
            2);
  EXPECT_EQ(
      metric_value(*metrics, "flashserve_requests_total", "api=\"grpc\",status=\"cancelled\"").value_or(-1), 2);
  EXPECT_EQ(server_->stop(SIGTERM), 0);
}

// --log-format json: every line is one JSON object (the rate-limited line about a malformed
// request too), and each generation call writes one access line. The build (version, commit) is the same in --version, GetModelInfo and
// flashserve_build_info, whose model label is --model-name.
TEST_F(LifecycleE2E, JsonLogsAccessLinesAndTheBuildEverywhere) {
  ASSERT_NO_FATAL_FAILURE(
      start({"--device", "cpu", "--log-format", "json", "--model-name", "smol"}));
  ASSERT_TRUE(server_->wait_serving().ok());
  auto stub = server_->stub();
  const UnaryResult ok = generate(stub.get(), greedy_request("Hi", 3), kRpcTimeout);
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  v1::GenerateRequest invalid = greedy_request("Hi", 3);
  invalid.mutable_sampling()->set_top_p(7);
  EXPECT_EQ(generate(stub.get(), invalid, kRpcTimeout).status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  {  // bytes that are not a GenerateRequest (invalid UTF-8 in the prompt)
    grpc::Slice slice(std::string("\x0a\x02\xc3\x28", 4));
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    auto context = context_with_timeout(kRpcTimeout);
    const grpc::Status status =
        grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
            server_->channel().get(),
            grpc::internal::RpcMethod("/flashserve.v1.Generation/Generate",
                                      grpc::internal::RpcMethod::NORMAL_RPC),
            context.get(), request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  const v1::ModelInfo info = model_info(stub.get());
  EXPECT_FALSE(info.server_version().empty());
  EXPECT_FALSE(info.server_commit().empty());

  const CommandResult version = run_command(server_binary() + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out, "flashserve " + info.server_version() + " (commit " +
                             info.server_commit() + ")\n");

  const auto metrics = server_->scrape_metrics();
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metric_value(*metrics, "flashserve_build_info",
                         "commit=\"" + info.server_commit() + "\",device=\"cpu\","
                         "model=\"smol\",version=\"" + info.server_version() + "\"")
                .value_or(-1),
            1);
  EXPECT_EQ(server_->stop(SIGTERM), 0);
  std::istringstream log(server_->log());
  std::string entry;
  int num_lines = 0, num_ok = 0, num_invalid = 0, num_malformed = 0;
  while (std::getline(log, entry)) {
    ++num_lines;
    if (entry.find("malformed request from") != std::string::npos) {
      ++num_malformed;
      EXPECT_THAT(entry, ::testing::HasSubstr("\"level\":\"warning\""));
    }
    EXPECT_THAT(entry, ::testing::MatchesRegex("\\{\"time\":\"[^\"]+\",\"level\":\"(info|warning|error)\",\"msg\":.*\\}"));
    if (entry.find("\"msg\":\"access\"") == std::string::npos) continue;
    if (entry.find("\"status\":\"OK\"") != std::string::npos) {
      ++num_ok;
      EXPECT_THAT(entry, ::testing::HasSubstr("\"method\":\"Generate\""));
      EXPECT_THAT(entry, ::testing::HasSubstr("\"finish_reason\":\"length\""));
      EXPECT_THAT(entry, ::testing::HasSubstr("\"completion_tokens\":3"));
    } else if (entry.find("\"status\":\"INVALID_ARGUMENT\"") != std::string::npos) {
      ++num_invalid;
      EXPECT_THAT(entry, ::testing::HasSubstr("\"finish_reason\":\"rejected\""));
    }
  }
  EXPECT_GT(num_lines, 5);
  EXPECT_EQ(num_ok, 1);
  EXPECT_EQ(num_invalid, 2);  // the bad field, and the malformed bytes (issue 23: refused
                              // unary calls write their access line too)
  EXPECT_EQ(num_malformed, 1);
}

// --device cuda serves from the GPU where one is visible, and fails at start with a message
// naming the flag where none is.
TEST_F(LifecycleE2E, DeviceCudaServesOrIsAClearError) {
  auto server = ServerProcess::start(model_, {"--device", "cuda"}, std::chrono::seconds(60));
  if (kernels::cuda_device_count() == 0) {
    ASSERT_FALSE(server.ok());
    EXPECT_THAT(std::string(server.status().message()), ::testing::HasSubstr("--device cuda"));
    return;
  }
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->stop(SIGTERM), 0);
}

}  // namespace
}  // namespace flashserve::e2e
