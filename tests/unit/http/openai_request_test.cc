// server/http/openai_request.h: OpenAI JSON bodies -> v1::GenerateRequest, and the shared
// validation's errors (server/api/validation.h) renamed into this API's fields.
#include "server/http/openai_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/api/validation.h"

namespace flashserve::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

api::RequestLimits limits() {
  api::RequestLimits l;
  l.context_length = 2048;
  l.vocab_size = 1000;
  l.max_new_tokens = 512;
  return l;
}

// The message of parsing `body` (which must fail).
std::string parse_error(Endpoint endpoint, const std::string& body) {
  const absl::StatusOr<OpenAiRequest> r = parse_openai_request(endpoint, body);
  EXPECT_FALSE(r.ok()) << body;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  return std::string(r.status().message());
}

// The message of parsing then validating `body` with the gRPC API's rules (must fail there).
std::string validation_error(Endpoint endpoint, const std::string& body) {
  const absl::StatusOr<OpenAiRequest> r = parse_openai_request(endpoint, body);
  EXPECT_TRUE(r.ok()) << body << ": " << r.status();
  if (!r.ok()) return "";
  const absl::Status status =
      openai_field_names(api::validate_generate_request(r->request, limits()), *r);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body;
  return std::string(status.message());
}

TEST(OpenAiRequestTest, CompletionFieldsMapToTheProto) {
  const absl::StatusOr<OpenAiRequest> r = parse_openai_request(
      Endpoint::kCompletions,
      R"({"model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
          "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "presence_penalty": 0.5,
          "frequency_penalty": -0.5, "seed": 42, "stop": ["\n", "END"],
          "stop_token_ids": [3, 4], "ignore_eos": true, "logprobs": 2, "n": 1,
          "user": "ignored", "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "m");
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  const v1::GenerateRequest& g = r->request;
  EXPECT_EQ(g.prompt(), "Hello");
  EXPECT_EQ(g.stopping().max_new_tokens(), 7);
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().top_k(), 40);
  EXPECT_FLOAT_EQ(g.sampling().min_p(), 0.05f);
  EXPECT_FLOAT_EQ(g.sampling().repetition_penalty(), 1.1f);
  EXPECT_FLOAT_EQ(g.sampling().presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().frequency_penalty(), -0.5f);
  EXPECT_EQ(g.sampling().seed(), 42u);
  ASSERT_EQ(g.stopping().stop_size(), 2);
  EXPECT_EQ(g.stopping().stop(1), "END");
  EXPECT_THAT(g.stopping().stop_token_ids(), ::testing::ElementsAre(3, 4));
  EXPECT_TRUE(g.stopping().ignore_eos());
  EXPECT_TRUE(g.logprobs());  // completions: logprobs = number of alternatives
  EXPECT_EQ(g.top_logprobs(), 2);
}

TEST(OpenAiRequestTest, UnsetFieldsStayUnset) {
  const absl::StatusOr<OpenAiRequest> r = parse_openai_request(
      Endpoint::kCompletions, R"({"prompt": "x", "temperature": null, "stop": null})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->request.sampling().has_temperature());
  EXPECT_FALSE(r->request.sampling().has_seed());
  EXPECT_FALSE(r->request.stopping().has_max_new_tokens());
  EXPECT_EQ(r->request.stopping().stop_size(), 0);
  EXPECT_FALSE(r->request.logprobs());
  EXPECT_FALSE(r->stream);
}

TEST(OpenAiRequestTest, PromptForms) {
  auto parsed = [](const std::string& prompt) {
    return parse_openai_request(Endpoint::kCompletions, "{\"prompt\": " + prompt + "}");
  };
  EXPECT_EQ(parsed(R"(["one"])")->request.prompt(), "one");  // a batch of one
  EXPECT_THAT(parsed("[5, 6, 7]")->request.token_ids().ids(), ::testing::ElementsAre(5, 6, 7));
  EXPECT_THAT(parsed("[[5, 6]]")->request.token_ids().ids(), ::testing::ElementsAre(5, 6));
  EXPECT_THAT(parse_error(Endpoint::kCompletions, R"({"prompt": ["a", "b"]})"),
              StartsWith("prompt: a batch of prompts is not supported"));
  EXPECT_THAT(parse_error(Endpoint::kCompletions, R"({"prompt": [1, "b"]})"),
              StartsWith("prompt[1]: must be a token id"));
  EXPECT_THAT(parse_error(Endpoint::kCompletions, R"({"prompt": 3})"), StartsWith("prompt: "));
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"model": "m"})"), "prompt: is required");
}

TEST(OpenAiRequestTest, ChatMessagesAndTextParts) {
  const absl::StatusOr<OpenAiRequest> r = parse_openai_request(
      Endpoint::kChatCompletions,
      R"({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                                    {"type": "text", "text": "there"}]}],
          "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->request.chat().messages_size(), 2);
  EXPECT_EQ(r->request.chat().messages(0).role(), "system");
  EXPECT_EQ(r->request.chat().messages(1).content(), "Hi there");
  EXPECT_EQ(r->request.stopping().max_new_tokens(), 9);
  EXPECT_EQ(r->max_tokens_field, "max_completion_tokens");
  EXPECT_TRUE(r->request.logprobs());
  EXPECT_EQ(r->request.top_logprobs(), 3);

  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, R"({"messages": "hi"})"),
            "messages: must be a list of messages");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, R"({"messages": [{"content": "x"}]})"),
            "messages[0].role: must be a string");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions,
                        R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
            "messages[0].content[0]: only parts of type \"text\" are supported");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions, R"({"messages": [{"role": "user"}]})"),
            "messages[0].content: is required");
}

TEST(OpenAiRequestTest, JsonTypesAreChecked) {
  // Malformed JSON: the message says where and what (issue 23: "is not valid JSON" alone
  // left the client guessing).
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "Hi", "max_tokens": })"),
            "body: is not valid JSON: parse error at line 1, column 32: syntax error while "
            "parsing value - unexpected '}'; expected '[', '{', or a literal");
  EXPECT_THAT(parse_error(Endpoint::kCompletions, "not json"),
              ::testing::StartsWith("body: is not valid JSON: parse error at line 1, column 2"));
  EXPECT_THAT(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": 1e999})"),
              ::testing::StartsWith("body: is not valid JSON: number overflow parsing '1e999'"));
  EXPECT_EQ(parse_error(Endpoint::kCompletions, "[1]"), "body: must be a JSON object");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "temperature": "hot"})"),
            "temperature: must be a number");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": 2.5})"),
            "max_tokens: must be an integer");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": 1e20})"),
            "max_tokens: must be an integer");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": 5000000000})"),
            "max_tokens: 5000000000 is out of range");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "seed": -1})"),
            "seed: -1 is negative");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "stream": "yes"})"),
            "stream: must be true or false");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "stop": 5})"),
            "stop: must be a string or a list of strings");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "stop": ["a", 1]})"),
            "stop[1]: must be a string");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "model": 4})"),
            "model: must be a string");
  EXPECT_EQ(parse_error(Endpoint::kCompletions,
                        R"({"prompt": "x", "stream_options": {"include_usage": true}})"),
            "stream_options: is only allowed with stream = true");
}

TEST(OpenAiRequestTest, UnsupportedFeaturesAreRefusedByName) {
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "n": 2})"),
            "n: 2 is not supported (only n = 1)");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "best_of": 3})"),
            "best_of: 3 is not supported (only best_of = 1)");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "echo": true})"),
            "echo: is not supported");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "suffix": "end"})"),
            "suffix: is not supported");
  EXPECT_EQ(parse_error(Endpoint::kCompletions, R"({"prompt": "x", "logit_bias": {"5": 1}})"),
            "logit_bias: is not supported");
  EXPECT_EQ(parse_error(Endpoint::kChatCompletions,
                        R"({"messages": [], "tools": [{"type": "function"}]})"),
            "tools: is not supported");
  EXPECT_THAT(parse_error(Endpoint::kChatCompletions,
                          R"({"messages": [], "response_format": {"type": "json_object"}})"),
              StartsWith("response_format: only"));
  // Spelled the way clients send the defaults: accepted.
  EXPECT_TRUE(parse_openai_request(Endpoint::kCompletions,
                                   R"({"prompt": "x", "n": 1, "echo": false, "suffix": "",
                                       "logit_bias": {}, "best_of": 1})")
                  .ok());
  // vLLM's spelling of "top_k off".
  EXPECT_EQ(parse_openai_request(Endpoint::kCompletions, R"({"prompt": "x", "top_k": -1})")
                ->request.sampling()
                .top_k(),
            0);
}

TEST(OpenAiRequestTest, SharedValidationErrorsNameThisApisFields) {
  EXPECT_THAT(validation_error(Endpoint::kCompletions, R"({"prompt": "x", "top_p": 1.5})"),
              StartsWith("top_p: 1.5 is out of range (0, 1]"));
  EXPECT_THAT(validation_error(Endpoint::kCompletions, R"({"prompt": "x", "temperature": 101})"),
              StartsWith("temperature: 101 is out of range"));
  EXPECT_THAT(validation_error(Endpoint::kCompletions, R"({"prompt": "x", "max_tokens": 513})"),
              StartsWith("max_tokens: 513 is out of range [1, 512]"));
  EXPECT_THAT(validation_error(Endpoint::kChatCompletions,
                               R"({"messages": [{"role": "user", "content": "x"}],
                                   "max_completion_tokens": 0})"),
              StartsWith("max_completion_tokens: 0 is out of range"));
  EXPECT_THAT(validation_error(Endpoint::kCompletions, R"({"prompt": "x", "stop": ["a", ""]})"),
              StartsWith("stop[1]: is empty"));
  EXPECT_THAT(validation_error(Endpoint::kCompletions, R"({"prompt": [1, 5000]})"),
              StartsWith("prompt[1]: unknown token id 5000"));
  EXPECT_THAT(validation_error(Endpoint::kChatCompletions,
                               R"({"messages": [{"role": "tool", "content": "x"}]})"),
              StartsWith("messages[0].role: unknown role 'tool'"));
  EXPECT_THAT(validation_error(Endpoint::kChatCompletions, R"({"messages": []})"),
              StartsWith("messages: at least one message"));
  // top_logprobs is chat's name; completions call the same number logprobs.
  EXPECT_THAT(validation_error(Endpoint::kChatCompletions,
                               R"({"messages": [{"role": "user", "content": "x"}],
                                   "top_logprobs": 2})"),
              StartsWith("top_logprobs: needs logprobs = true"));
  EXPECT_THAT(validation_error(Endpoint::kCompletions, R"({"prompt": "x", "logprobs": 99})"),
              StartsWith("logprobs: 99 is out of range"));
  EXPECT_THAT(validation_error(Endpoint::kCompletions, R"({"prompt": "x", "top_k": 1001})"),
              StartsWith("top_k: 1001 is out of range [0, 1000]"));
}

TEST(OpenAiRequestTest, PromptTooLongForTheContextNamesMaxTokens) {
  OpenAiRequest r;
  r.endpoint = Endpoint::kChatCompletions;
  r.max_tokens_field = "max_completion_tokens";
  const absl::Status renamed = openai_field_names(
      absl::InvalidArgumentError("stopping.max_new_tokens: 10 prompt tokens + max_new_tokens "
                                 "9000 exceed the context length 8192"),
      r);
  EXPECT_EQ(renamed.message(),
            "max_completion_tokens: 10 prompt tokens + max_completion_tokens 9000 exceed the "
            "context length 8192");
  // Other codes pass unchanged.
  EXPECT_EQ(openai_field_names(absl::ResourceExhaustedError("sampling.x"), r).message(),
            "sampling.x");
}

TEST(OpenAiRequestTest, ErrorParamIsTheLeadingField) {
  EXPECT_EQ(error_param(absl::InvalidArgumentError("top_p: 2 is out of range")), "top_p");
  EXPECT_EQ(error_param(absl::InvalidArgumentError("messages[1].role: unknown")),
            "messages[1].role");
  EXPECT_EQ(error_param(absl::InvalidArgumentError("the model said: no")), "");
  EXPECT_EQ(error_param(absl::UnavailableError("loading: wait")), "");
}

}  // namespace
}  // namespace flashserve::http
