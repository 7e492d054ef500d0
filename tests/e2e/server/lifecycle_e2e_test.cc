// End-to-end: server life cycle (health while starting, SERVING, NOT_SERVING while draining,
// clean exit on SIGTERM) and overload (RESOURCE_EXHAUSTED at once when the waiting queue is
// full). Each test starts its own server process. Skipped without the model file.
#include <signal.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server/e2e_util.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {
namespace {

using Health = grpc::health::v1::HealthCheckResponse;

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

// Health is never SERVING before the model is loaded: every answer before the first SERVING
// is NOT_SERVING (the loading phase may be too short to observe), and Generation answers
// UNAVAILABLE while not serving.
TEST_F(LifecycleE2E, HealthTurnsServingOnlyAfterLoading) {
  ASSERT_NO_FATAL_FAILURE(start({}));
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
  EXPECT_EQ(server_->stop(SIGINT), 0);
}

// SIGTERM: health goes NOT_SERVING at once, admitted requests still finish completely, new
// ones are refused with UNAVAILABLE, and the process exits 0.
TEST_F(LifecycleE2E, SigtermDrainsThenExits) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  ASSERT_TRUE(server_->wait_serving().ok());
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
  EXPECT_EQ(metric_value(*metrics, "flashserve_requests_total", "status=\"rejected\"").value_or(-1),
            2);
  EXPECT_EQ(
      metric_value(*metrics, "flashserve_requests_total", "status=\"cancelled\"").value_or(-1), 2);
  EXPECT_EQ(server_->stop(SIGTERM), 0);
}

// --device cuda fails clearly while the CUDA backend does not exist.
TEST_F(LifecycleE2E, DeviceCudaIsAClearError) {
  auto server = ServerProcess::start(model_, {"--device", "cuda"}, std::chrono::seconds(30));
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), ::testing::HasSubstr("--device cuda"));
}

}  // namespace
}  // namespace flashserve::e2e
