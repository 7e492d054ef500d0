// flashserve-cli load against bench/serving's flashserve-canned-server (api::Server, the
// default model's tokenizer and the engine over a runner that answers every step at once):
// the load client's figures are exact where they can be (every request, every token, the
// messages that carried them) and the canned server serves the real API (its text is the
// canned text, its usage what was asked). bench/serving/run.sh CANNED=1 runs the same pair
// for throughput.
#include <regex>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/server/e2e_util.h"
#include "tests/e2e/server/server_process.h"

namespace flashserve::e2e {
namespace {

using ::testing::HasSubstr;

class CannedLoadE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string model = default_model_path();
    if (model.empty()) return;
    auto server = ServerProcess::start_binary(canned_server_binary(), model,
                                              {"--max-num-seqs", "64", "--noprefix_caching"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
    ASSERT_TRUE(server_->wait_serving().ok()) << server_->log();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (default_model_path().empty()) GTEST_SKIP() << "default model not in models/";
    ASSERT_NE(server_, nullptr);
  }

  static ServerProcess* server_;
};

ServerProcess* CannedLoadE2E::server_ = nullptr;

TEST_F(CannedLoadE2E, ServesTheCannedTextThroughTheRealApi) {
  v1::GenerateRequest request = greedy_request("Hello there", 30);
  request.mutable_stopping()->set_ignore_eos(true);
  const StreamResult stream = generate_stream(server_->stub().get(), request);
  ASSERT_TRUE(stream.status.ok()) << stream.status.error_message();
  EXPECT_EQ(stream.token_ids().size(), 30u);
  ASSERT_TRUE(stream.messages.back().has_final());
  EXPECT_EQ(stream.messages.back().final().usage().completion_tokens(), 30);
  EXPECT_EQ(stream.messages.back().final().finish_reason(), v1::FINISH_REASON_LENGTH);
  // 30 tokens of a 10-token text, cycled: the text twice at least, in pieces.
  EXPECT_THAT(stream.text(), HasSubstr("quick brown fox jumps over the lazy dog."));
  const UnaryResult unary = generate(server_->stub().get(), request);
  ASSERT_TRUE(unary.status.ok());
  EXPECT_EQ(unary.response.text(), stream.text());
}

TEST_F(CannedLoadE2E, LoadClientCountsEveryRequestTokenAndMessage) {
  const CommandResult run = run_command(
      cli_binary() + " --target " + server_->target() +
      " load --concurrency 16 --requests 48 --prompt-tokens 100 --max-tokens 64 --ignore-eos"
      " --temperature 0 2>&1");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_THAT(run.out, HasSubstr("48 requests, concurrency 16"));
  EXPECT_THAT(run.out, HasSubstr("succeeded 48, failed 0"));
  EXPECT_THAT(run.out, HasSubstr("tokens: 4800 prompt, 3072 generated (64.0 per request)"));
  // Every message but the last carries a token; tokens may share a message, never split.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(run.out, m, std::regex(R"(messages: (\d+) stream messages)")))
      << run.out;
  const int num_messages = std::stoi(m[1]);
  EXPECT_GE(num_messages, 48);
  EXPECT_LE(num_messages, 48 * 65);
  EXPECT_THAT(run.out, HasSubstr("client cpu: "));
  EXPECT_THAT(run.out, HasSubstr("time to first token"));
  // The first wave: the 16 streams started together, their first tokens' times sorted.
  ASSERT_TRUE(std::regex_search(
      run.out, m,
      std::regex(R"(start-up: the first (\d+) streams' first tokens ([\d.]+) ms \(first\) \.\. )"
                 R"(([\d.]+) ms \(median\) \.\. ([\d.]+) ms \(last\) after the start)")))
      << run.out;
  EXPECT_EQ(std::stoi(m[1]), 16);
  EXPECT_LE(std::stod(m[2]), std::stod(m[3]));
  EXPECT_LE(std::stod(m[3]), std::stod(m[4]));
  EXPECT_GT(std::stod(m[2]), 0);
}

}  // namespace
}  // namespace flashserve::e2e
