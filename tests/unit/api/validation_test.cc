// Request validation: each bad input is InvalidArgument and the message names the field.
#include "server/api/validation.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flashserve::api {
namespace {

using ::testing::HasSubstr;

RequestLimits test_limits() {
  RequestLimits limits;
  limits.context_length = 100;
  limits.vocab_size = 1000;
  limits.max_new_tokens = 50;
  limits.max_stop_strings = 2;
  limits.max_stop_string_length = 8;
  limits.max_stop_token_ids = 2;
  limits.max_top_logprobs = 5;
  limits.max_chat_messages = 3;
  limits.max_input_bytes = 64;
  return limits;
}

v1::GenerateRequest valid_request() {
  v1::GenerateRequest request;
  request.set_prompt("Hello");
  return request;
}

// Expects InvalidArgument whose message starts with `field` followed by ':'.
void expect_invalid(const v1::GenerateRequest& request, const std::string& field) {
  const absl::Status status = validate_generate_request(request, test_limits());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), ::testing::StartsWith(field + ":")) << status;
}

TEST(ValidationTest, AcceptsMinimalRequests) {
  EXPECT_TRUE(validate_generate_request(valid_request(), test_limits()).ok());

  v1::GenerateRequest chat;
  auto* message = chat.mutable_chat()->add_messages();
  message->set_role("user");
  message->set_content("hi");
  EXPECT_TRUE(validate_generate_request(chat, test_limits()).ok());

  v1::GenerateRequest ids;
  ids.mutable_token_ids()->add_ids(0);
  ids.mutable_token_ids()->add_ids(999);
  EXPECT_TRUE(validate_generate_request(ids, test_limits()).ok());
}

TEST(ValidationTest, AcceptsBoundaryValues) {
  v1::GenerateRequest request = valid_request();
  auto* s = request.mutable_sampling();
  s->set_temperature(0);
  s->set_top_k(1000);
  s->set_top_p(1);
  s->set_min_p(1);
  s->set_repetition_penalty(kMaxRepetitionPenalty);
  s->set_presence_penalty(-2);
  s->set_frequency_penalty(2);
  s->set_seed(std::numeric_limits<uint64_t>::max());
  auto* stopping = request.mutable_stopping();
  stopping->set_max_new_tokens(50);
  stopping->add_stop("12345678");
  stopping->add_stop("x");
  stopping->add_stop_token_ids(0);
  stopping->add_stop_token_ids(999);
  request.set_logprobs(true);
  request.set_top_logprobs(5);
  const absl::Status status = validate_generate_request(request, test_limits());
  EXPECT_TRUE(status.ok()) << status;
}

TEST(ValidationTest, MissingOrEmptyInput) {
  expect_invalid(v1::GenerateRequest(), "input");
  v1::GenerateRequest request;
  request.set_prompt("");
  expect_invalid(request, "prompt");
  request.mutable_token_ids();
  expect_invalid(request, "token_ids.ids");
  request.mutable_chat();
  expect_invalid(request, "chat.messages");
}

TEST(ValidationTest, PromptTooLong) {
  v1::GenerateRequest request;
  request.set_prompt(std::string(65, 'a'));
  expect_invalid(request, "prompt");
}

TEST(ValidationTest, UnknownTokenIds) {
  v1::GenerateRequest request;
  request.mutable_token_ids()->add_ids(5);
  request.mutable_token_ids()->add_ids(1000);
  expect_invalid(request, "token_ids.ids[1]");
  request.mutable_token_ids()->set_ids(1, -1);
  expect_invalid(request, "token_ids.ids[1]");
  const absl::Status status = validate_generate_request(request, test_limits());
  EXPECT_THAT(std::string(status.message()), HasSubstr("-1"));
}

TEST(ValidationTest, TokenIdsOverContext) {
  v1::GenerateRequest request;
  for (int i = 0; i < 101; ++i) request.mutable_token_ids()->add_ids(1);
  expect_invalid(request, "token_ids.ids");
}

TEST(ValidationTest, ChatRolesAndContents) {
  v1::GenerateRequest request;
  auto* m0 = request.mutable_chat()->add_messages();
  m0->set_role("system");
  m0->set_content("be brief");
  auto* m1 = request.mutable_chat()->add_messages();
  m1->set_role("robot");
  m1->set_content("hi");
  expect_invalid(request, "chat.messages[1].role");
  m1->set_role("user");
  m1->set_content("");
  expect_invalid(request, "chat.messages[1].content");
  m1->set_content(std::string(60, 'x'));  // 8 + 60 bytes > 64
  expect_invalid(request, "chat.messages");
  m1->set_content("hi");
  EXPECT_TRUE(validate_generate_request(request, test_limits()).ok());
  for (int i = 0; i < 2; ++i) *request.mutable_chat()->add_messages() = *m1;
  expect_invalid(request, "chat.messages");  // 4 messages > 3
}

TEST(ValidationTest, SamplingOutOfRange) {
  struct Case {
    std::string field;
    std::function<void(v1::SamplingParams*)> set;
  };
  const float nan = std::nanf("");
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<Case> cases = {
      {"sampling.temperature", [](auto* s) { s->set_temperature(-0.1f); }},
      {"sampling.temperature", [](auto* s) { s->set_temperature(101); }},
      {"sampling.temperature", [&](auto* s) { s->set_temperature(nan); }},
      {"sampling.temperature", [&](auto* s) { s->set_temperature(inf); }},
      {"sampling.top_k", [](auto* s) { s->set_top_k(-1); }},
      {"sampling.top_k", [](auto* s) { s->set_top_k(1001); }},
      {"sampling.top_p", [](auto* s) { s->set_top_p(0); }},
      {"sampling.top_p", [](auto* s) { s->set_top_p(1.01f); }},
      {"sampling.top_p", [&](auto* s) { s->set_top_p(nan); }},
      {"sampling.min_p", [](auto* s) { s->set_min_p(-0.5f); }},
      {"sampling.min_p", [](auto* s) { s->set_min_p(2); }},
      {"sampling.repetition_penalty", [](auto* s) { s->set_repetition_penalty(0); }},
      {"sampling.repetition_penalty", [](auto* s) { s->set_repetition_penalty(11); }},
      {"sampling.presence_penalty", [](auto* s) { s->set_presence_penalty(-2.5f); }},
      {"sampling.frequency_penalty", [](auto* s) { s->set_frequency_penalty(3); }},
      {"sampling.frequency_penalty", [&](auto* s) { s->set_frequency_penalty(nan); }},
  };
  for (const Case& c : cases) {
    v1::GenerateRequest request = valid_request();
    c.set(request.mutable_sampling());
    SCOPED_TRACE(request.sampling().ShortDebugString());
    expect_invalid(request, c.field);
  }
}

// Issue 10 defect 5: a value just past a bound used to print as the bound ("100 is out of
// range [0, 100]"). The message shows the value exactly as received.
TEST(ValidationTest, RangeErrorsPrintTheExactValue) {
  v1::GenerateRequest request = valid_request();
  request.mutable_sampling()->set_temperature(100.00001f);
  absl::Status status = validate_generate_request(request, test_limits());
  EXPECT_EQ(status.message(), "sampling.temperature: 100.00001 is out of range [0, 100]");
  request = valid_request();
  request.mutable_sampling()->set_top_p(1.0000001f);
  status = validate_generate_request(request, test_limits());
  EXPECT_EQ(status.message(), "sampling.top_p: 1.0000001 is out of range (0, 1]");
  request = valid_request();
  request.mutable_sampling()->set_presence_penalty(-2.0000002f);
  status = validate_generate_request(request, test_limits());
  EXPECT_EQ(status.message(), "sampling.presence_penalty: -2.0000002 is out of range [-2, 2]");
  request = valid_request();
  request.mutable_sampling()->set_min_p(std::nanf(""));
  status = validate_generate_request(request, test_limits());
  EXPECT_EQ(status.message(), "sampling.min_p: nan is out of range [0, 1]");
}

TEST(ValidationTest, StoppingLimits) {
  v1::GenerateRequest request = valid_request();
  request.mutable_stopping()->set_max_new_tokens(0);
  expect_invalid(request, "stopping.max_new_tokens");
  request.mutable_stopping()->set_max_new_tokens(51);
  expect_invalid(request, "stopping.max_new_tokens");
  request.mutable_stopping()->set_max_new_tokens(-3);
  expect_invalid(request, "stopping.max_new_tokens");

  request = valid_request();
  for (int i = 0; i < 3; ++i) request.mutable_stopping()->add_stop("a");
  expect_invalid(request, "stopping.stop");

  request = valid_request();
  request.mutable_stopping()->add_stop("ok");
  request.mutable_stopping()->add_stop("123456789");
  expect_invalid(request, "stopping.stop[1]");
  request.mutable_stopping()->set_stop(1, "");
  expect_invalid(request, "stopping.stop[1]");

  request = valid_request();
  for (int i = 0; i < 3; ++i) request.mutable_stopping()->add_stop_token_ids(1);
  expect_invalid(request, "stopping.stop_token_ids");

  request = valid_request();
  request.mutable_stopping()->add_stop_token_ids(1000);
  expect_invalid(request, "stopping.stop_token_ids[0]");
}

TEST(ValidationTest, Logprobs) {
  v1::GenerateRequest request = valid_request();
  request.set_logprobs(true);
  request.set_top_logprobs(6);
  expect_invalid(request, "top_logprobs");
  request.set_top_logprobs(-1);
  expect_invalid(request, "top_logprobs");
  request.set_logprobs(false);
  request.set_top_logprobs(2);
  expect_invalid(request, "top_logprobs");
}

TEST(ValidationTest, KnownRoles) {
  EXPECT_TRUE(is_known_role("system"));
  EXPECT_TRUE(is_known_role("user"));
  EXPECT_TRUE(is_known_role("assistant"));
  EXPECT_FALSE(is_known_role("User"));
  EXPECT_FALSE(is_known_role(""));
}

}  // namespace
}  // namespace flashserve::api
