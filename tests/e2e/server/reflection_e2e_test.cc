// End-to-end server reflection (issue 23, item 1): grpc.reflection.v1 and v1alpha, called
// without a token, with a wrong one and with the right one, against a server without token
// auth, one with tokens and reflection closed (the default), and one with tokens and
// --auth-open-reflection. Before the fix gRPC's reflection library, registered by a static
// initializer, served v1alpha to anyone whatever the flag said. Refused calls are counted in
// flashserve_auth_failures_total.
#include <signal.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/server/e2e_util.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {
namespace {

using ::testing::UnorderedElementsAre;

// What one ServerReflectionInfo call with one request gave.
template <typename Response>
struct ReflectionResult {
  grpc::Status status;
  std::vector<Response> responses;
};

// One request on a fresh stream, `token` as bearer token ("" = no authorization metadata).
template <typename Rpc, typename Request, typename Response>
ReflectionResult<Response> reflect(const std::shared_ptr<grpc::Channel>& channel,
                                   const std::string& token, const Request& request) {
  auto context = context_with_timeout(std::chrono::seconds(30));
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  auto stub = Rpc::NewStub(channel);
  auto stream = stub->ServerReflectionInfo(context.get());
  ReflectionResult<Response> result;
  if (stream->Write(request)) {
    stream->WritesDone();
    Response response;
    while (stream->Read(&response)) result.responses.push_back(response);
  }
  result.status = stream->Finish();
  return result;
}

// The services a list_services request names, or the call's status when it failed.
template <typename Rpc, typename Request, typename Response>
grpc::Status list_services(const std::shared_ptr<grpc::Channel>& channel,
                           const std::string& token, std::set<std::string>* names) {
  Request request;
  request.set_list_services("");
  const ReflectionResult<Response> result = reflect<Rpc, Request, Response>(channel, token, request);
  if (!result.status.ok()) return result.status;
  if (result.responses.size() != 1) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "not one response");
  }
  for (const auto& service : result.responses[0].list_services_response().service()) {
    names->insert(service.name());
  }
  return grpc::Status::OK;
}

grpc::Status list_v1(const std::shared_ptr<grpc::Channel>& ch, const std::string& token,
                     std::set<std::string>* names) {
  namespace r = grpc::reflection::v1;
  return list_services<r::ServerReflection, r::ServerReflectionRequest,
                       r::ServerReflectionResponse>(ch, token, names);
}

grpc::Status list_v1alpha(const std::shared_ptr<grpc::Channel>& ch, const std::string& token,
                          std::set<std::string>* names) {
  namespace r = grpc::reflection::v1alpha;
  return list_services<r::ServerReflection, r::ServerReflectionRequest,
                       r::ServerReflectionResponse>(ch, token, names);
}

class ReflectionE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = default_model_path();
    if (model_.empty()) GTEST_SKIP() << "default model not in models/";
    char dir[] = "/tmp/flashserve-reflection-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    std::ofstream(dir_ + "/tokens") << "right-token\n";
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }

  // Starts a server with `flags` (reflection answers while the model loads) and checks every
  // token against both versions: served (the four services listed) or UNAUTHENTICATED.
  void expect_reflection(const std::vector<std::string>& flags, bool open_without_token) {
    auto server = ServerProcess::start(model_, flags);
    ASSERT_TRUE(server.ok()) << server.status();
    for (const std::string token : {"", "wrong-token", "right-token"}) {
      const bool served = open_without_token || token == "right-token";
      for (const auto& list : {&list_v1, &list_v1alpha}) {
        std::set<std::string> names;
        const grpc::Status status = list((*server)->channel(), token, &names);
        const std::string what = (list == &list_v1 ? "v1, token '" : "v1alpha, token '") +
                                 token + "'";
        if (served) {
          EXPECT_TRUE(status.ok()) << what << ": " << status.error_message();
          EXPECT_THAT(names, UnorderedElementsAre("flashserve.v1.Generation",
                                                  "grpc.health.v1.Health",
                                                  "grpc.reflection.v1.ServerReflection",
                                                  "grpc.reflection.v1alpha.ServerReflection"))
              << what;
        } else {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << what;
          EXPECT_TRUE(names.empty()) << what;
        }
      }
    }
    // Every refused call is counted: two tokens refused, two versions.
    const auto metrics = (*server)->scrape_metrics();
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    const auto failures = metric_value(*metrics, "flashserve_auth_failures_total");
    ASSERT_TRUE(failures.ok()) << failures.status();
    EXPECT_EQ(*failures, open_without_token ? 0 : 4);
    EXPECT_EQ((*server)->stop(SIGTERM), 0) << (*server)->log();
  }

  std::string model_;
  std::string dir_;
};

TEST_F(ReflectionE2E, WithoutTokenAuthReflectionIsOpen) {
  expect_reflection({}, /*open_without_token=*/true);
}

TEST_F(ReflectionE2E, WithTokenAuthReflectionNeedsTheToken) {
  expect_reflection({"--auth-token-file", dir_ + "/tokens"}, /*open_without_token=*/false);
  expect_reflection({"--auth-token-file", dir_ + "/tokens", "--auth-open-reflection=false"},
                    /*open_without_token=*/false);
}

TEST_F(ReflectionE2E, OpenReflectionIsServedToAnyone) {
  expect_reflection({"--auth-token-file", dir_ + "/tokens", "--auth-open-reflection=true"},
                    /*open_without_token=*/true);
}

// The descriptors a tool needs to call Generate: the file that defines the service, with the
// files it imports; an unknown symbol is NOT_FOUND in the response, not a failed call.
TEST_F(ReflectionE2E, DescribesTheServices) {
  namespace r = grpc::reflection::v1alpha;
  auto server = ServerProcess::start(model_, {});
  ASSERT_TRUE(server.ok()) << server.status();
  r::ServerReflectionRequest request;
  request.set_file_containing_symbol("flashserve.v1.Generation.Generate");
  auto result = reflect<r::ServerReflection, r::ServerReflectionRequest,
                        r::ServerReflectionResponse>((*server)->channel(), "", request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.responses.size(), 1u);
  const auto& files = result.responses[0].file_descriptor_response().file_descriptor_proto();
  ASSERT_GE(files.size(), 1);
  google::protobuf::FileDescriptorProto first;
  ASSERT_TRUE(first.ParseFromString(files[0]));
  EXPECT_EQ(first.name(), "flashserve/v1/generation.proto");
  EXPECT_EQ(first.service(0).name(), "Generation");
  EXPECT_EQ(result.responses[0].original_request().file_containing_symbol(),
            "flashserve.v1.Generation.Generate");

  request.set_file_containing_symbol("flashserve.v1.NoSuchThing");
  result = reflect<r::ServerReflection, r::ServerReflectionRequest,
                   r::ServerReflectionResponse>((*server)->channel(), "", request);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  ASSERT_EQ(result.responses.size(), 1u);
  EXPECT_EQ(result.responses[0].error_response().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(result.responses[0].error_response().error_message(),
              ::testing::HasSubstr("flashserve.v1.NoSuchThing"));
  EXPECT_EQ((*server)->stop(SIGTERM), 0) << (*server)->log();
}

}  // namespace
}  // namespace flashserve::e2e
