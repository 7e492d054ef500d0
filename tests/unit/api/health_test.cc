// grpc.health.v1.Health (server/api/health.h) in-process: a real gRPC server on a free
// loopback port with only the health service, driven directly through set_serving() and
// shutdown(). The engine-driven transitions are in service_test.cc (HealthFollowsTheEngine).
#include "server/api/health.h"

#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace flashserve::api {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
using ::testing::HasSubstr;

constexpr auto kTimeout = std::chrono::seconds(20);
constexpr char kGeneration[] = "flashserve.v1.Generation";

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    stub_ = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    health_.shutdown();
    // A far deadline: open Watch streams must already have been finished by shutdown();
    // streams the deadline had to cancel would end CANCELLED, which the tests check against.
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(60));
  }

  std::unique_ptr<grpc::ClientContext> context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + kTimeout);
    return context;
  }

  grpc::Status check(const std::string& service, HealthCheckResponse* response) {
    HealthCheckRequest request;
    request.set_service(service);
    return stub_->Check(context().get(), request, response);
  }
  HealthCheckResponse::ServingStatus status_of(const std::string& service) {
    HealthCheckResponse response;
    const grpc::Status st = check(service, &response);
    EXPECT_TRUE(st.ok()) << service << ": " << st.error_message();
    return response.status();
  }

  struct Watch {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader;
    // The next message's status; UNKNOWN when the stream ended.
    HealthCheckResponse::ServingStatus next() {
      HealthCheckResponse response;
      return reader->Read(&response) ? response.status() : HealthCheckResponse::UNKNOWN;
    }
  };
  Watch watch(const std::string& service) {
    Watch w;
    w.context = context();
    HealthCheckRequest request;
    request.set_service(service);
    w.reader = stub_->Watch(w.context.get(), request);
    return w;
  }

  HealthService health_{{kGeneration}};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
};

TEST_F(HealthServiceTest, CheckIsNotServingFromTheFirstAnswerUntilSetServing) {
  EXPECT_EQ(status_of(""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(status_of(kGeneration), HealthCheckResponse::NOT_SERVING);
  health_.set_serving(true);
  EXPECT_EQ(status_of(""), HealthCheckResponse::SERVING);
  EXPECT_EQ(status_of(kGeneration), HealthCheckResponse::SERVING);
  health_.set_serving(false);
  EXPECT_EQ(status_of(""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(status_of(kGeneration), HealthCheckResponse::NOT_SERVING);
}

// Liveness stays SERVING while readiness goes up and down (loading, draining) and falls only
// at shutdown; a Watch of it sees no readiness change.
TEST_F(HealthServiceTest, LivenessIsServingUntilShutdownWhateverReadinessSays) {
  const std::string live = HealthService::kLivenessService;
  EXPECT_EQ(status_of(live), HealthCheckResponse::SERVING);
  Watch watch_live = watch(live);
  EXPECT_EQ(watch_live.next(), HealthCheckResponse::SERVING);
  health_.set_serving(true);
  health_.set_serving(false);
  EXPECT_EQ(status_of(live), HealthCheckResponse::SERVING);
  EXPECT_EQ(status_of(kGeneration), HealthCheckResponse::NOT_SERVING);
  health_.shutdown();
  EXPECT_EQ(watch_live.next(), HealthCheckResponse::NOT_SERVING);  // the first change
  EXPECT_EQ(watch_live.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(HealthServiceTest, CheckOfAnUnknownServiceIsNotFound) {
  health_.set_serving(true);
  HealthCheckResponse response;
  const grpc::Status st = check("flashserve.v1.Nope", &response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(), HasSubstr("'flashserve.v1.Nope'"));
}

TEST_F(HealthServiceTest, WatchSendsTheCurrentStatusThenEveryChange) {
  Watch all = watch("");
  Watch generation = watch(kGeneration);
  EXPECT_EQ(all.next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(generation.next(), HealthCheckResponse::NOT_SERVING);
  health_.set_serving(true);
  EXPECT_EQ(all.next(), HealthCheckResponse::SERVING);
  EXPECT_EQ(generation.next(), HealthCheckResponse::SERVING);
  health_.set_serving(true);  // no change, no message: the next one is NOT_SERVING
  health_.set_serving(false);
  EXPECT_EQ(all.next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(generation.next(), HealthCheckResponse::NOT_SERVING);
  // A Watch opened later starts from the current status.
  health_.set_serving(true);
  Watch late = watch("");
  EXPECT_EQ(late.next(), HealthCheckResponse::SERVING);
}

// Unknown service: SERVICE_UNKNOWN once, then the stream stays open (spec) and sees no
// changes; it ends only at shutdown (UNAVAILABLE, not CANCELLED by the Shutdown deadline).
TEST_F(HealthServiceTest, WatchOfAnUnknownServiceStaysOpenUntilShutdown) {
  Watch unknown = watch("flashserve.v1.Nope");
  EXPECT_EQ(unknown.next(), HealthCheckResponse::SERVICE_UNKNOWN);
  health_.set_serving(true);
  health_.set_serving(false);
  health_.shutdown();
  EXPECT_EQ(unknown.next(), HealthCheckResponse::UNKNOWN);  // ended, no further message
  EXPECT_EQ(unknown.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(HealthServiceTest, ShutdownSendsNotServingAndEndsEveryWatch) {
  health_.set_serving(true);
  Watch all = watch("");
  Watch generation = watch(kGeneration);
  EXPECT_EQ(all.next(), HealthCheckResponse::SERVING);
  EXPECT_EQ(generation.next(), HealthCheckResponse::SERVING);
  health_.shutdown();
  health_.set_serving(true);  // ignored after shutdown
  for (Watch* w : {&all, &generation}) {
    EXPECT_EQ(w->next(), HealthCheckResponse::NOT_SERVING);
    EXPECT_EQ(w->next(), HealthCheckResponse::UNKNOWN);
    const grpc::Status st = w->reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  }
  EXPECT_EQ(status_of(""), HealthCheckResponse::NOT_SERVING);
  // A Watch arriving after shutdown gets the status and ends at once.
  Watch late = watch("");
  EXPECT_EQ(late.next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(late.next(), HealthCheckResponse::UNKNOWN);
  EXPECT_EQ(late.reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(HealthServiceTest, ClientCancelEndsTheWatch) {
  Watch w = watch("");
  EXPECT_EQ(w.next(), HealthCheckResponse::NOT_SERVING);
  w.context->TryCancel();
  while (w.next() != HealthCheckResponse::UNKNOWN) {
  }
  EXPECT_EQ(w.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  health_.set_serving(true);  // nothing to write to any more
  EXPECT_EQ(status_of(""), HealthCheckResponse::SERVING);
}

// Many watchers while the status flips as fast as it can, watchers opening meanwhile: each
// stream alternates (never the same status twice in a row), ends with the final NOT_SERVING
// and finishes UNAVAILABLE at shutdown.
TEST_F(HealthServiceTest, ConcurrentFlipsAndWatchersStayConsistent) {
  constexpr int kNumWatchers = 8;
  constexpr int kNumFlips = 2000;
  std::atomic<int> num_started{0};
  std::vector<std::vector<HealthCheckResponse::ServingStatus>> seen(kNumWatchers);
  std::vector<grpc::Status> finished(kNumWatchers);
  std::vector<std::thread> readers;
  for (int i = 0; i < kNumWatchers; ++i) {
    readers.emplace_back([&, i] {
      Watch w = watch(i % 2 == 0 ? "" : kGeneration);
      HealthCheckResponse response;
      bool first = true;
      while (w.reader->Read(&response)) {
        if (first) num_started.fetch_add(1);
        first = false;
        seen[i].push_back(response.status());
      }
      finished[i] = w.reader->Finish();
    });
  }
  for (int i = 0; i < kNumFlips; ++i) health_.set_serving(i % 2 == 0);
  while (num_started.load() < kNumWatchers) std::this_thread::yield();
  for (int i = 0; i < kNumFlips; ++i) health_.set_serving(i % 2 == 0);
  health_.shutdown();
  for (std::thread& t : readers) t.join();
  for (int i = 0; i < kNumWatchers; ++i) {
    ASSERT_FALSE(seen[i].empty()) << i;
    for (size_t k = 1; k < seen[i].size(); ++k) EXPECT_NE(seen[i][k], seen[i][k - 1]) << i;
    EXPECT_EQ(seen[i].back(), HealthCheckResponse::NOT_SERVING) << i;
    EXPECT_EQ(finished[i].error_code(), grpc::StatusCode::UNAVAILABLE)
        << i << ": " << finished[i].error_message();
  }
}

// The watcher drives the service: follows `is_serving` and leaves NOT_SERVING behind when
// stopped. (One change per read: two quick flips may reach a watcher as none.)
TEST_F(HealthServiceTest, WatcherFollowsItsPredicate) {
  std::atomic<bool> serving{false};
  Watch w = watch("");
  EXPECT_EQ(w.next(), HealthCheckResponse::NOT_SERVING);
  HealthWatcher watcher(&health_, [&] { return serving.load(); }, std::chrono::milliseconds(5));
  serving = true;
  EXPECT_EQ(w.next(), HealthCheckResponse::SERVING);
  serving = false;
  EXPECT_EQ(w.next(), HealthCheckResponse::NOT_SERVING);
  serving = true;
  EXPECT_EQ(w.next(), HealthCheckResponse::SERVING);
  watcher.stop();
  EXPECT_EQ(w.next(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(status_of(kGeneration), HealthCheckResponse::NOT_SERVING);
}

}  // namespace
}  // namespace flashserve::api
