// The Generation service in-process: a real gRPC server (loopback, free port) over a real
// Engine whose model is the engine tests' fake runner and tokenizer, so every path is fast and
// deterministic — including those the real model cannot trigger on demand: a model error, a
// request cancelled or timed out while still queued, a stalled engine. No test sleeps for time
// to pass: a gate holds the engine inside a step for as long as a test needs (or lets a
// counted number of steps through), and the stall test moves a manual engine clock.
#include "server/api/generation_service.h"

#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/client_unary_call.h"
#include "gtest/gtest.h"
#include "server/api/health.h"
#include "server/api/raw_messages.h"
#include "server/metrics/metrics.h"
#include "tests/support/engine_fakes.h"
#include "tests/support/manual_clock.h"

namespace flashserve::api {
namespace {

using engine::fakes::FakeRunner;
using engine::fakes::FakeRunnerState;
using engine::fakes::FakeTokenizer;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr int kContext = 256;
constexpr auto kTimeout = std::chrono::seconds(20);

std::unique_ptr<grpc::ClientContext> context_with(std::chrono::milliseconds timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  return context;
}

v1::GenerateRequest request(const std::string& prompt, int max_new_tokens) {
  v1::GenerateRequest r;
  r.set_prompt(prompt);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stopping()->set_max_new_tokens(max_new_tokens);
  r.mutable_stopping()->set_ignore_eos(true);
  return r;
}

// Holds the engine thread inside forward(): open, every step passes; closed, a step waits
// until the test opens the gate or allows it through (allow(n): n more steps).
class StepGate {
 public:
  void open() { set(kOpen); }
  void close() { set(0); }
  void allow(int num_steps) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (permits_ != kOpen) permits_ += num_steps;
    }
    cv_.notify_all();
  }
  // Called by the runner at each step.
  void pass() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return permits_ > 0; });
    if (permits_ != kOpen) --permits_;
  }

 private:
  static constexpr int kOpen = std::numeric_limits<int>::max();
  void set(int permits) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      permits_ = permits;
    }
    cv_.notify_all();
  }
  // std::mutex: visible to ThreadSanitizer (absl::Mutex from Debian is not).
  std::mutex mu_;
  std::condition_variable cv_;
  int permits_ = kOpen;  // guarded by mu_
};

// A JSON logger writing to a temporary file that the test reads back.
struct LogFile {
  LogFile() : path(make_path()), file(std::fopen(path.c_str(), "a")), logger(LogFormat::kJson, file) {}
  ~LogFile() {
    std::fclose(file);
    std::remove(path.c_str());
  }
  static std::string make_path() {
    char name[] = "/tmp/flashserve-service-log-XXXXXX";
    const int fd = ::mkstemp(name);
    if (fd >= 0) ::close(fd);
    return name;
  }
  // The "access" lines written so far.
  std::vector<std::string> access_lines() const {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"msg\":\"access\"") != std::string::npos) lines.push_back(line);
    }
    return lines;
  }
  // Polls (5 s at most) until `n` access lines are there.
  std::vector<std::string> wait_for_access_lines(size_t n) const {
    std::vector<std::string> lines = access_lines();
    for (int i = 0; i < 1000 && lines.size() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      lines = access_lines();
    }
    return lines;
  }

  const std::string path;
  std::FILE* const file;
  const Logger logger;
};

class ServiceTest : public ::testing::Test {
 protected:
  // Builds the engine (started unless told otherwise), the service and the gRPC server.
  void start(engine::EngineOptions options = {}, bool with_backend = true) {
    runner_state_ = std::make_shared<FakeRunnerState>();
    runner_state_->on_forward = [this](const model::ForwardBatch&) { gate_.pass(); };
    engine_ = std::make_unique<engine::Engine>(
        std::make_unique<FakeRunner>(runner_state_, /*num_kv_blocks=*/64, /*block_size=*/16,
                                     kContext),
        tokenizer_, options, &metrics_);
    engine_->start();
    backend_.engine = engine_.get();
    backend_.prompt.tokenizer = &tokenizer_;
    backend_.prompt.chat_template = nullptr;
    backend_.prompt.limits.context_length = kContext;
    backend_.prompt.limits.vocab_size = tokenizer_.vocab_size();
    backend_.engine_options = options;
    backend_.device = "cpu";
    service_ = std::make_unique<GenerationService>(&metrics_, auth_.get(),
                                                   log_ ? &log_->logger : nullptr);
    if (with_backend) service_->set_backend(&backend_);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    target_ = "127.0.0.1:" + std::to_string(port);
    channel_ = grpc::CreateChannel(target_, grpc::InsecureChannelCredentials());
    stub_ = v1::Generation::NewStub(channel_);
  }

  void TearDown() override {
    gate_.open();
    health_.shutdown();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    engine_.reset();
  }

  // Polls the engine (another thread) until `done` holds, for at most 10 s.
  engine::EngineSnapshot wait_until(std::function<bool(const engine::EngineSnapshot&)> done) {
    engine::EngineSnapshot s;
    for (int i = 0; i < 2000; ++i) {
      s = engine_->snapshot();
      if (done(s)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return s;
  }
  bool idle() {
    const auto s = wait_until([](const auto& s) {
      return s.num_running == 0 && s.num_waiting == 0 && s.num_kv_blocks_used == 0;
    });
    return s.num_running == 0 && s.num_waiting == 0 && s.num_kv_blocks_used == 0;
  }

  // The health service's answer for `service` over gRPC (UNKNOWN when the call fails).
  grpc::health::v1::HealthCheckResponse::ServingStatus health_status(const std::string& service) {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    const grpc::Status st = health->Check(context_with(kTimeout).get(), req, &resp);
    return st.ok() ? resp.status() : grpc::health::v1::HealthCheckResponse::UNKNOWN;
  }
  // Polls until "" and the Generation service both answer `want` (5 s at most).
  bool wait_for_health(grpc::health::v1::HealthCheckResponse::ServingStatus want) {
    for (int i = 0; i < 1000; ++i) {
      if (health_status("") == want && health_status("flashserve.v1.Generation") == want) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  double requests_total() {
    double sum = 0;
    const std::string text = metrics_.serialize();
    size_t at = 0;
    while ((at = text.find("\nflashserve_requests_total{", at)) != std::string::npos) {
      at = text.find("} ", at) + 2;
      sum += std::stod(text.substr(at));
    }
    return sum;
  }

  // Set before start() to give the service a token check and an access log.
  std::unique_ptr<TokenAuth> auth_;
  std::unique_ptr<LogFile> log_;
  FakeTokenizer tokenizer_;
  metrics::Metrics metrics_;
  testing::ManualClock clock_;  // the engine's where a test says so (options.clock)
  std::shared_ptr<FakeRunnerState> runner_state_;
  StepGate gate_;
  std::unique_ptr<engine::Engine> engine_;
  Backend backend_;
  std::unique_ptr<GenerationService> service_;
  HealthService health_{{std::string(v1::Generation::service_full_name())}};
  std::unique_ptr<grpc::Server> server_;
  std::string target_;  // "127.0.0.1:PORT"
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

TEST_F(ServiceTest, WithoutModelEveryMethodIsUnavailable) {
  ASSERT_NO_FATAL_FAILURE(start({}, /*with_backend=*/false));
  v1::GenerateResponse response;
  EXPECT_EQ(stub_->Generate(context_with(kTimeout).get(), request("ab", 2), &response)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
  auto context = context_with(kTimeout);
  auto reader = stub_->GenerateStream(context.get(), request("ab", 2));
  v1::GenerateStreamResponse message;
  EXPECT_FALSE(reader->Read(&message));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  v1::TokenizeRequest tok;
  tok.set_text("ab");
  v1::TokenizeResponse ids;
  EXPECT_EQ(stub_->Tokenize(context_with(kTimeout).get(), tok, &ids).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  v1::ModelInfo info;
  EXPECT_EQ(stub_->GetModelInfo(context_with(kTimeout).get(), {}, &info).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ServiceTest, StreamCarriesEveryTokenOnceAndOneFinalMessage) {
  ASSERT_NO_FATAL_FAILURE(start());
  v1::GenerateResponse unary;
  ASSERT_TRUE(stub_->Generate(context_with(kTimeout).get(), request("hello", 150), &unary).ok());
  ASSERT_EQ(unary.token_ids_size(), 150);
  EXPECT_EQ(unary.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(unary.usage().completion_tokens(), 150);

  gate_.close();
  auto context = context_with(kTimeout);
  auto reader = stub_->GenerateStream(context.get(), request("hello", 150));
  std::vector<v1::GenerateStreamResponse> messages;
  v1::GenerateStreamResponse message;
  gate_.allow(1);  // the prefill step: the first token
  ASSERT_TRUE(reader->Read(&message));
  messages.push_back(message);
  // A slow reader: the rest of the generation ends before the next Read, so its events
  // queue up meanwhile and are merged into later messages.
  gate_.open();
  ASSERT_TRUE(idle());
  while (reader->Read(&message)) messages.push_back(message);
  ASSERT_TRUE(reader->Finish().ok());
  std::string text;
  std::vector<int32_t> ids;
  int num_final = 0;
  for (const auto& m : messages) {
    text += m.text();
    ids.insert(ids.end(), m.token_ids().begin(), m.token_ids().end());
    num_final += m.has_final();
  }
  EXPECT_EQ(num_final, 1);
  EXPECT_TRUE(messages.back().has_final());
  EXPECT_EQ(text, unary.text());
  EXPECT_EQ(ids, std::vector<int32_t>(unary.token_ids().begin(), unary.token_ids().end()));
  EXPECT_LE(messages.size(), 151u);
  EXPECT_TRUE(idle());
}

// A client that stops reading: once HTTP/2 flow control holds the server's writes back, the
// tokens generated meanwhile wait in the call and go out merged into one message per write
// (one write in flight per call), never one queued message per token. The messages still
// concatenate to exactly the unary call's tokens and text.
TEST_F(ServiceTest, TokensOfAStalledReaderAreMergedIntoFewMessages) {
  ASSERT_NO_FATAL_FAILURE(start());
  constexpr int kTokens = 200;
  v1::GenerateRequest r = request("hello", kTokens);
  r.set_logprobs(true);
  r.set_top_logprobs(20);  // ~150 bytes per token: the client's window fills after a few
  v1::GenerateResponse unary;
  ASSERT_TRUE(stub_->Generate(context_with(kTimeout).get(), r, &unary).ok());
  ASSERT_EQ(unary.token_ids_size(), kTokens);

  grpc::ChannelArguments args;  // a small receive window that does not grow
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto stub = v1::Generation::NewStub(
      grpc::CreateCustomChannel(target_, grpc::InsecureChannelCredentials(), args));
  auto context = context_with(kTimeout);
  auto reader = stub->GenerateStream(context.get(), r);
  std::vector<v1::GenerateStreamResponse> messages(1);
  ASSERT_TRUE(reader->Read(&messages[0]));
  // The engine generates every token while the client reads nothing.
  ASSERT_TRUE(idle());
  v1::GenerateStreamResponse message;
  while (reader->Read(&message)) messages.push_back(message);
  ASSERT_TRUE(reader->Finish().ok());

  std::string text;
  std::vector<int32_t> ids;
  int num_logprobs = 0;
  for (const auto& m : messages) {
    text += m.text();
    ids.insert(ids.end(), m.token_ids().begin(), m.token_ids().end());
    num_logprobs += m.logprobs_size();
    EXPECT_EQ(m.logprobs_size(), m.token_ids_size());
  }
  EXPECT_EQ(ids, std::vector<int32_t>(unary.token_ids().begin(), unary.token_ids().end()));
  EXPECT_EQ(text, unary.text());
  EXPECT_EQ(num_logprobs, kTokens);
  EXPECT_TRUE(messages.back().has_final());
  // A few messages fill the window; then the write in flight waits and everything generated
  // meanwhile leaves in the next one (one message per token without merging: kTokens).
  EXPECT_LT(messages.size(), static_cast<size_t>(kTokens / 4)) << messages.size();
}

TEST_F(ServiceTest, ModelErrorEndsTheCallWithItsStatus) {
  ASSERT_NO_FATAL_FAILURE(start());
  runner_state_->fail_on_call = 3;
  v1::GenerateResponse response;
  const grpc::Status status =
      stub_->Generate(context_with(kTimeout).get(), request("hello", 20), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(), HasSubstr("injected failure"));
  EXPECT_TRUE(idle());
}

TEST_F(ServiceTest, CancelWhileQueuedAndWhileRunning) {
  engine::EngineOptions options;
  options.max_num_seqs = 1;
  ASSERT_NO_FATAL_FAILURE(start(options));
  // A runs, one step at a time as the gate allows; B waits behind it.
  gate_.close();
  grpc::ClientContext a_context, b_context;
  auto a = stub_->GenerateStream(&a_context, request("running", 200));
  v1::GenerateStreamResponse message;
  gate_.allow(1);  // A's prefill: its first token
  ASSERT_TRUE(a->Read(&message));
  auto b = stub_->GenerateStream(&b_context, request("waiting", 5));
  ASSERT_EQ(wait_until([](const auto& s) { return s.num_waiting == 1; }).num_waiting, 1);
  b_context.TryCancel();
  while (b->Read(&message)) {
  }
  EXPECT_EQ(b->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // B's cancellation reaches the engine from a gRPC thread; the engine drops B when it next
  // takes its input. A's steps go through one per poll until then, fewer than A's 199 more
  // tokens, so A is still running afterwards.
  int num_allowed = 0;
  EXPECT_EQ(wait_until([&](const auto& s) {
              if (s.num_waiting != 0 && num_allowed < 150) {
                gate_.allow(1);
                ++num_allowed;
              }
              return s.num_waiting == 0;
            }).num_waiting,
            0);
  EXPECT_EQ(engine_->snapshot().num_running, 1);  // A
  a_context.TryCancel();
  while (a->Read(&message)) {
  }
  EXPECT_EQ(a->Finish().error_code(), grpc::StatusCode::CANCELLED);
  gate_.open();
  EXPECT_TRUE(idle());
}

TEST_F(ServiceTest, DeadlineWhileQueuedIsDeadlineExceeded) {
  engine::EngineOptions options;
  options.max_num_seqs = 1;
  ASSERT_NO_FATAL_FAILURE(start(options));
  gate_.close();  // the engine is stuck in a forward pass
  grpc::ClientContext a_context;
  auto a = stub_->GenerateStream(&a_context, request("first", 4));
  ASSERT_EQ(wait_until([](const auto& s) { return s.num_running == 1; }).num_running, 1);
  v1::GenerateResponse response;
  const grpc::Status status = stub_->Generate(
      context_with(std::chrono::milliseconds(200)).get(), request("second", 4), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  gate_.open();
  v1::GenerateStreamResponse message;
  while (a->Read(&message)) {
  }
  EXPECT_TRUE(a->Finish().ok());
  EXPECT_TRUE(idle());
}

TEST_F(ServiceTest, FullQueueAndDrainingAreRefused) {
  engine::EngineOptions options;
  options.max_num_seqs = 1;
  options.max_waiting = 1;
  ASSERT_NO_FATAL_FAILURE(start(options));
  gate_.close();
  grpc::ClientContext a_context, b_context;
  auto a = stub_->GenerateStream(&a_context, request("first", 3));
  ASSERT_EQ(wait_until([](const auto& s) { return s.num_running == 1; }).num_running, 1);
  auto b = stub_->GenerateStream(&b_context, request("second", 3));
  ASSERT_EQ(wait_until([](const auto& s) { return s.num_waiting == 1; }).num_waiting, 1);
  v1::GenerateResponse response;
  EXPECT_EQ(stub_->Generate(context_with(kTimeout).get(), request("third", 3), &response)
                .error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  gate_.open();
  v1::GenerateStreamResponse message;
  while (a->Read(&message)) {
  }
  while (b->Read(&message)) {
  }
  EXPECT_TRUE(a->Finish().ok());
  EXPECT_TRUE(b->Finish().ok());
  engine_->drain();
  EXPECT_EQ(stub_->Generate(context_with(kTimeout).get(), request("late", 3), &response)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ServiceTest, ChatWithoutTemplateIsFailedPrecondition) {
  ASSERT_NO_FATAL_FAILURE(start());
  v1::GenerateRequest r = request("unused", 2);
  auto* m = r.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  v1::GenerateResponse response;
  const grpc::Status status = stub_->Generate(context_with(kTimeout).get(), r, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), StartsWith("chat:"));
}

// Whatever happens to a request, it is counted exactly once in flashserve_requests_total.
TEST_F(ServiceTest, EveryRequestEndsWithExactlyOneFinalStatus) {
  engine::EngineOptions options;
  options.max_num_seqs = 2;
  options.max_waiting = 2;
  ASSERT_NO_FATAL_FAILURE(start(options));
  int num_sent = 0;
  v1::GenerateResponse response;
  // Completed, invalid, rejected for capacity, cancelled, model error.
  for (int i = 0; i < 3; ++i, ++num_sent) {
    EXPECT_TRUE(stub_->Generate(context_with(kTimeout).get(), request("ok", 5), &response).ok());
  }
  v1::GenerateRequest invalid = request("x", 5);
  invalid.mutable_sampling()->set_top_p(7);
  for (int i = 0; i < 2; ++i, ++num_sent) {
    EXPECT_EQ(stub_->Generate(context_with(kTimeout).get(), invalid, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  gate_.close();  // the holders below stay in the engine until the gate opens
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::GenerateStreamResponse>>> readers;
  for (int i = 0; i < 4; ++i, ++num_sent) {  // 2 running, then 2 waiting
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub_->GenerateStream(contexts.back().get(), request("hold", 100)));
    if (i == 1) {  // the second is admitted at the next step, once it has arrived
      ASSERT_EQ(wait_until([](const auto& s) { return s.num_waiting == 1; }).num_waiting, 1);
      gate_.allow(1);
    }
    const int running = std::min(i + 1, 2), waiting = std::max(i - 1, 0);
    const auto s = wait_until([&](const auto& s) {
      return s.num_running == running && s.num_waiting == waiting;
    });
    ASSERT_EQ(s.num_running, running);
    ASSERT_EQ(s.num_waiting, waiting);
  }
  for (int i = 0; i < 2; ++i, ++num_sent) {
    EXPECT_EQ(stub_->Generate(context_with(kTimeout).get(), request("full", 5), &response)
                  .error_code(),
              grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  for (auto& c : contexts) c->TryCancel();
  v1::GenerateStreamResponse message;
  for (auto& r : readers) {
    while (r->Read(&message)) {
    }
    EXPECT_EQ(r->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  gate_.open();
  ASSERT_TRUE(idle());  // the client saw CANCELLED at once; the engine drops them next step
  runner_state_->fail_on_call = runner_state_->calls() + 1;
  ++num_sent;
  EXPECT_EQ(stub_->Generate(context_with(kTimeout).get(), request("boom", 5), &response)
                .error_code(),
            grpc::StatusCode::INTERNAL);
  ASSERT_TRUE(idle());
  double total = 0;  // the gRPC threads count a call after its client has the status
  for (int i = 0; i < 200 && total < num_sent; ++i) {
    total = requests_total();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(total, num_sent) << metrics_.serialize();
}

// Health follows the engine: SERVING while it runs, NOT_SERVING while it is stalled with
// work pending, SERVING again once it makes progress, NOT_SERVING after drain. wait_for polls
// the health service, which the watcher thread updates every 10 ms.
TEST_F(ServiceTest, HealthFollowsTheEngine) {
  engine::EngineOptions options;
  options.stall_threshold = std::chrono::milliseconds(100);
  options.clock = &clock_;
  ASSERT_NO_FATAL_FAILURE(start(options));
  HealthWatcher watcher(&health_, [this] { return engine_serving(engine_->snapshot()); },
                        std::chrono::milliseconds(10));
  EXPECT_TRUE(wait_for_health(grpc::health::v1::HealthCheckResponse::SERVING));
  gate_.close();
  grpc::ClientContext context;
  auto reader = stub_->GenerateStream(&context, request("stall", 3));
  ASSERT_EQ(wait_until([](const auto& s) { return s.num_running == 1; }).num_running, 1);
  EXPECT_TRUE(wait_for_health(grpc::health::v1::HealthCheckResponse::SERVING));  // not stalled yet
  clock_.advance(options.stall_threshold + std::chrono::milliseconds(1));  // in that step
  EXPECT_TRUE(wait_for_health(grpc::health::v1::HealthCheckResponse::NOT_SERVING));
  // While stalled, new requests fail at once with UNAVAILABLE instead of queueing.
  v1::GenerateResponse refused_response;
  const grpc::Status refused =
      stub_->Generate(context_with(kTimeout).get(), request("late", 2), &refused_response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.error_message(), HasSubstr("stalled"));
  gate_.open();
  EXPECT_TRUE(wait_for_health(grpc::health::v1::HealthCheckResponse::SERVING));
  v1::GenerateStreamResponse message;
  while (reader->Read(&message)) {
  }
  EXPECT_TRUE(reader->Finish().ok());
  // Recovered: served again.
  v1::GenerateResponse served;
  EXPECT_TRUE(stub_->Generate(context_with(kTimeout).get(), request("again", 2), &served).ok());
  engine_->drain();
  EXPECT_TRUE(wait_for_health(grpc::health::v1::HealthCheckResponse::NOT_SERVING));
  watcher.stop();
}

// Issue 10 (GPU faults): a model runner error in a step fails that step's request with
// INTERNAL naming the error, fails the queued one with UNAVAILABLE, turns health NOT_SERVING
// for good (no hang, no recovery on a device in an unknown state) and refuses new requests
// with UNAVAILABLE naming the cause.
TEST_F(ServiceTest, RunnerFailureFailsEveryRequestAndTurnsHealthNotServing) {
  engine::EngineOptions options;
  options.max_num_seqs = 1;  // the second request waits in the queue
  options.on_runner_failure = [this](const absl::Status&) { health_.fail(); };  // as server.cc
  ASSERT_NO_FATAL_FAILURE(start(options));
  HealthWatcher watcher(&health_, [this] { return engine_serving(engine_->snapshot()); },
                        std::chrono::milliseconds(10));
  ASSERT_TRUE(wait_for_health(grpc::health::v1::HealthCheckResponse::SERVING));

  runner_state_->fail_on_call = runner_state_->calls() + 1;
  gate_.close();  // the failing step waits in forward() until both requests are in
  grpc::ClientContext running_context, waiting_context;
  auto running = stub_->GenerateStream(&running_context, request("boom", 5));
  ASSERT_EQ(wait_until([](const auto& s) { return s.num_running == 1; }).num_running, 1);
  auto waiting = stub_->GenerateStream(&waiting_context, request("queued", 5));
  ASSERT_EQ(wait_until([](const auto& s) { return s.num_waiting == 1; }).num_waiting, 1);
  gate_.open();

  v1::GenerateStreamResponse message;
  while (running->Read(&message)) {
  }
  const grpc::Status failed = running->Finish();
  EXPECT_EQ(failed.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(failed.error_message(), HasSubstr("the model runner failed"));
  EXPECT_THAT(failed.error_message(), HasSubstr("injected failure"));
  while (waiting->Read(&message)) {
  }
  const grpc::Status dropped = waiting->Finish();
  EXPECT_EQ(dropped.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(dropped.error_message(), HasSubstr("injected failure"));

  EXPECT_TRUE(wait_for_health(grpc::health::v1::HealthCheckResponse::NOT_SERVING));
  // Liveness too: the device's state is unknown, only a restart brings it back.
  EXPECT_EQ(health_status(HealthService::kLivenessService),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  for (int i = 0; i < 2; ++i) {  // refused at once, unary and streaming, naming the cause
    v1::GenerateResponse response;
    const grpc::Status refused =
        stub_->Generate(context_with(kTimeout).get(), request("late", 2), &response);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(refused.error_message(), HasSubstr("the model runner failed"));
    EXPECT_THAT(refused.error_message(), HasSubstr("injected failure"));
    grpc::ClientContext context;
    auto late = stub_->GenerateStream(&context, request("late", 2));
    while (late->Read(&message)) {
    }
    EXPECT_EQ(late->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_TRUE(idle());
  // Still NOT_SERVING a while later: a failed runner does not come back.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(health_status(""), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  watcher.stop();
}

// ---- malformed requests (issue 10 defect 4) ---------------------------------------------

grpc::Status raw_unary(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                       const std::string& bytes) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  auto context = context_with(std::chrono::seconds(10));
  return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(), grpc::internal::RpcMethod(method.c_str(), grpc::internal::RpcMethod::NORMAL_RPC),
      context.get(), request, &response);
}

grpc::Status raw_stream(const std::shared_ptr<grpc::Channel>& channel, const std::string& bytes) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  auto context = context_with(std::chrono::seconds(10));
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
      grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
          channel.get(),
          grpc::internal::RpcMethod("/flashserve.v1.Generation/GenerateStream",
                                    grpc::internal::RpcMethod::SERVER_STREAMING),
          context.get(), request));
  grpc::ByteBuffer message;
  while (reader->Read(&message)) {
  }
  return reader->Finish();
}

// Field 1 (prompt), length 3, bytes that are not UTF-8.
const std::string kBadUtf8Prompt = std::string("\x0a\x03\xff\xfe", 4) + "a";
const std::string kTruncated = std::string("\x0a\x10" "ab", 4);     // says 16 bytes, has 2
const std::string kGarbage = std::string("\xff\xff\xff\xff\xff", 5);  // no valid tag

TEST_F(ServiceTest, MalformedProtobufIsInvalidArgumentWithAReason) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string generate = "/flashserve.v1.Generation/Generate";
  grpc::Status status = raw_unary(channel_, generate, kBadUtf8Prompt);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not a valid flashserve.v1.GenerateRequest"));
  EXPECT_THAT(status.error_message(), HasSubstr("UTF-8"));
  for (const std::string& bytes : {kTruncated, kGarbage}) {
    status = raw_unary(channel_, generate, bytes);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("not a valid flashserve.v1.GenerateRequest"));
    status = raw_stream(channel_, bytes);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("not a valid flashserve.v1.GenerateRequest"));
  }
  status = raw_unary(channel_, "/flashserve.v1.Generation/Tokenize", kBadUtf8Prompt);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("not a valid flashserve.v1.TokenizeRequest"));
  status = raw_unary(channel_, "/flashserve.v1.Generation/Detokenize", kGarbage);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Well-formed requests still work through the raw methods, and nothing leaked.
  v1::GenerateResponse response;
  auto context = context_with(kTimeout);
  ASSERT_TRUE(stub_->Generate(context.get(), request("abc", 3), &response).ok());
  EXPECT_EQ(response.token_ids_size(), 3);
  EXPECT_TRUE(idle());
}

TEST_F(ServiceTest, MalformedRequestLogsAreRateLimited) {
  ASSERT_NO_FATAL_FAILURE(start());
  install_protobuf_log_handler();
  const ProtobufLogCounts before = protobuf_log_counts();
  for (int i = 0; i < 30; ++i) {
    raw_unary(channel_, "/flashserve.v1.Generation/Generate", kBadUtf8Prompt);
  }
  const ProtobufLogCounts after = protobuf_log_counts();
  // One line per kLogInterval (10 s): this loop takes far less, so at most one is printed.
  EXPECT_LE(after.printed - before.printed, 1);
  EXPECT_GE(after.suppressed - before.suppressed, 29);
}

// ---- access lines (issue 23, item 4) -------------------------------------------------------

// A stream that its deadline ends is logged as DEADLINE_EXCEEDED, as the client sees it, not
// as cancelled by the client (gRPC cancels the call at the deadline, then the engine ends it).
TEST_F(ServiceTest, AStreamEndedByItsDeadlineIsLoggedAsDeadlineExceeded) {
  log_ = std::make_unique<LogFile>();
  ASSERT_NO_FATAL_FAILURE(start());
  gate_.close();  // the request's first step waits until the deadline has passed
  auto context = context_with(std::chrono::milliseconds(200));
  auto stream = stub_->GenerateStream(context.get(), request("abc", 50));
  v1::GenerateStreamResponse message;
  while (stream->Read(&message)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server's own deadline fires at about the moment the client's did; opened at once, the
  // gate let the fake runner finish all 50 tokens before the server saw the cancellation (an
  // "OK, length" line, seen once on a quiet machine). Let the server's timer fire first.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  gate_.open();
  EXPECT_TRUE(idle());
  const std::vector<std::string> lines = log_->wait_for_access_lines(1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("\"method\":\"GenerateStream\""));
  EXPECT_THAT(lines[0], HasSubstr("\"status\":\"DEADLINE_EXCEEDED\""));
  EXPECT_THAT(lines[0], Not(HasSubstr("cancelled by the client")));
}

// Unary calls refused before the engine write their access line as streams do: without a
// token, with malformed bytes, while the model loads.
TEST_F(ServiceTest, RefusedUnaryCallsWriteAnAccessLine) {
  const std::string tokens = LogFile::make_path();
  std::ofstream(tokens) << "the-token\n";
  auto auth = TokenAuth::load(tokens);
  std::remove(tokens.c_str());
  ASSERT_TRUE(auth.ok()) << auth.status();
  auth_ = std::move(*auth);
  log_ = std::make_unique<LogFile>();
  ASSERT_NO_FATAL_FAILURE(start(engine::EngineOptions(), /*with_backend=*/false));
  v1::GenerateResponse response;
  EXPECT_EQ(stub_->Generate(context_with(kTimeout).get(), request("abc", 3), &response)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto with_token = context_with(kTimeout);
  with_token->AddMetadata("authorization", "Bearer the-token");
  EXPECT_EQ(stub_->Generate(with_token.get(), request("abc", 3), &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);  // still loading
  grpc::Slice slice(kGarbage);
  grpc::ByteBuffer bytes(&slice, 1);
  grpc::ByteBuffer ignored;
  auto malformed = context_with(kTimeout);
  malformed->AddMetadata("authorization", "Bearer the-token");
  EXPECT_EQ((grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
                 channel_.get(),
                 grpc::internal::RpcMethod("/flashserve.v1.Generation/Generate",
                                           grpc::internal::RpcMethod::NORMAL_RPC),
                 malformed.get(), bytes, &ignored))
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  const std::vector<std::string> lines = log_->wait_for_access_lines(3);
  ASSERT_EQ(lines.size(), 3u);
  const char* statuses[] = {"UNAUTHENTICATED", "UNAVAILABLE", "INVALID_ARGUMENT"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(lines[i], HasSubstr("\"method\":\"Generate\"")) << lines[i];
    EXPECT_THAT(lines[i], HasSubstr(std::string("\"status\":\"") + statuses[i] + "\""))
        << lines[i];
    EXPECT_THAT(lines[i], HasSubstr("\"finish_reason\":\"rejected\"")) << lines[i];
  }
}

}  // namespace
}  // namespace flashserve::api
