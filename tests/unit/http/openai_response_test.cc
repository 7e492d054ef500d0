// server/http/openai_response.h: status codes, OpenAI's error shape, whole completions and
// the server-sent-event records of a stream, read back as JSON.
#include "server/http/openai_response.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tests/support/engine_fakes.h"

namespace flashserve::http {
namespace {

using Json = nlohmann::json;
using engine::fakes::FakeTokenizer;
using engine::fakes::letter;

ResponseMeta meta(Endpoint endpoint, const model::Tokenizer* tokenizer, bool logprobs = false,
                  bool include_usage = false) {
  ResponseMeta m;
  m.endpoint = endpoint;
  m.id = "id-1";
  m.created = 1700000000;
  m.model = "tiny";
  m.tokenizer = tokenizer;
  m.logprobs = logprobs;
  m.include_usage = include_usage;
  return m;
}

engine::GenerationEvent final_event(engine::FinishReason reason) {
  engine::GenerationEvent e;
  e.finished = true;
  e.finish_reason = reason;
  e.usage = {5, 3};
  return e;
}

// The JSON objects of "data: {...}\n\n" records; "[DONE]" as the string "[DONE]".
std::vector<Json> records(const std::string& sse) {
  std::vector<Json> out;
  for (absl::string_view record : absl::StrSplit(sse, "\n\n", absl::SkipEmpty())) {
    EXPECT_TRUE(absl::StartsWith(record, "data: ")) << record;
    const absl::string_view data = record.substr(6);
    out.push_back(data == "[DONE]" ? Json("[DONE]") : Json::parse(data));
  }
  return out;
}

TEST(OpenAiResponseTest, StatusCodes) {
  EXPECT_EQ(http_status(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(http_status(absl::FailedPreconditionError("x")), 400);
  EXPECT_EQ(http_status(absl::UnauthenticatedError("x")), 401);
  EXPECT_EQ(http_status(absl::NotFoundError("x")), 404);
  EXPECT_EQ(http_status(absl::ResourceExhaustedError("queue full")), 429);
  EXPECT_EQ(http_status(absl::UnavailableError("draining")), 503);
  EXPECT_EQ(http_status(absl::DeadlineExceededError("x")), 504);
  EXPECT_EQ(http_status(absl::InternalError("x")), 500);
}

TEST(OpenAiResponseTest, ErrorShape) {
  const Json e = Json::parse(error_json(absl::InvalidArgumentError("top_p: 2 is out of range")));
  EXPECT_EQ(e["error"]["message"], "top_p: 2 is out of range");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "top_p");
  EXPECT_TRUE(e["error"]["code"].is_null());
  const Json nf = Json::parse(error_json(absl::NotFoundError("model: 'x' is not served here")));
  EXPECT_EQ(nf["error"]["code"], "model_not_found");
  EXPECT_EQ(nf["error"]["type"], "not_found_error");
  EXPECT_EQ(Json::parse(error_json(absl::ResourceExhaustedError("full")))["error"]["type"],
            "rate_limit_error");
  // A 413 is the client's mistake whatever the status code behind it.
  EXPECT_EQ(Json::parse(error_json(absl::ResourceExhaustedError("body: big"), 413))["error"]
                                                                                    ["type"],
            "invalid_request_error");
}

TEST(OpenAiResponseTest, FinalErrors) {
  EXPECT_TRUE(final_error(final_event(engine::FinishReason::kStop)).ok());
  EXPECT_TRUE(final_error(final_event(engine::FinishReason::kStopSequence)).ok());
  EXPECT_TRUE(final_error(final_event(engine::FinishReason::kLength)).ok());
  EXPECT_EQ(final_error(final_event(engine::FinishReason::kCancelled)).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(final_error(final_event(engine::FinishReason::kDeadlineExceeded)).code(),
            absl::StatusCode::kDeadlineExceeded);
  engine::GenerationEvent failed = final_event(engine::FinishReason::kError);
  failed.status = absl::UnavailableError("drain limit passed");
  EXPECT_EQ(final_error(failed), failed.status);
  EXPECT_EQ(final_error(final_event(engine::FinishReason::kError)).code(),
            absl::StatusCode::kInternal);
}

TEST(OpenAiResponseTest, WholeCompletionAndChatCompletion) {
  FakeTokenizer tokenizer;
  Gathered gathered{"ab", {}};
  const Json c = Json::parse(completion_json(meta(Endpoint::kCompletions, &tokenizer), gathered,
                                             final_event(engine::FinishReason::kLength)));
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["id"], "id-1");
  EXPECT_EQ(c["model"], "tiny");
  EXPECT_EQ(c["choices"][0]["text"], "ab");
  EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(c["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(c["usage"], Json::parse(R"({"prompt_tokens":5,"completion_tokens":3,
                                        "total_tokens":8})"));
  const Json chat = Json::parse(completion_json(meta(Endpoint::kChatCompletions, &tokenizer),
                                                gathered,
                                                final_event(engine::FinishReason::kStopSequence)));
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"], Json::parse(R"({"role":"assistant","content":"ab"})"));
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
}

TEST(OpenAiResponseTest, LogprobsInBothShapes) {
  FakeTokenizer tokenizer;
  Gathered gathered;
  gathered.text = "ab";
  gathered.logprobs = {{letter('a'), -0.5f, {{letter('a'), -0.5f}, {letter('z'), -1.5f}}},
                       {letter('b'), -0.25f, {{letter('b'), -0.25f}, {letter('c'), -2.f}}}};
  const Json chat =
      Json::parse(completion_json(meta(Endpoint::kChatCompletions, &tokenizer, true), gathered,
                                  final_event(engine::FinishReason::kStop)));
  const Json& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "a");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.5f);
  EXPECT_EQ(content[0]["bytes"], Json::array({'a'}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "z");
  EXPECT_FLOAT_EQ(content[1]["top_logprobs"][1]["logprob"].get<float>(), -2.f);

  const Json c = Json::parse(completion_json(meta(Endpoint::kCompletions, &tokenizer, true),
                                             gathered, final_event(engine::FinishReason::kStop)));
  const Json& lp = c["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json::array({"a", "b"}));
  EXPECT_EQ(lp["text_offset"], Json::array({0, 1}));
  EXPECT_FLOAT_EQ(lp["token_logprobs"][1].get<float>(), -0.25f);
  EXPECT_FLOAT_EQ(lp["top_logprobs"][0]["z"].get<float>(), -1.5f);
}

TEST(OpenAiResponseTest, ChatStreamRecords) {
  FakeTokenizer tokenizer;
  const ResponseMeta m = meta(Endpoint::kChatCompletions, &tokenizer, false, true);
  size_t offset = 0;
  std::string sse = stream_start(m);
  engine::GenerationEvent piece;
  piece.text = "Hel";
  sse += stream_event(m, piece, &offset);
  sse += stream_event(m, engine::GenerationEvent(), &offset);  // nothing visible: no record
  engine::GenerationEvent last = final_event(engine::FinishReason::kStop);
  last.text = "lo";
  sse += stream_event(m, last, &offset);
  const std::vector<Json> r = records(sse);
  ASSERT_EQ(r.size(), 6u) << sse;
  EXPECT_EQ(r[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(r[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(r[1]["choices"][0]["delta"]["content"], "Hel");
  EXPECT_TRUE(r[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(r[1]["usage"].is_null());  // include_usage: null until the last record
  EXPECT_EQ(r[2]["choices"][0]["delta"]["content"], "lo");
  EXPECT_EQ(r[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(r[4]["choices"].empty());
  EXPECT_EQ(r[4]["usage"]["total_tokens"], 8);
  EXPECT_EQ(r[5], "[DONE]");
}

TEST(OpenAiResponseTest, CompletionStreamWithoutUsage) {
  FakeTokenizer tokenizer;
  const ResponseMeta m = meta(Endpoint::kCompletions, &tokenizer);
  size_t offset = 0;
  EXPECT_EQ(stream_start(m), "");
  engine::GenerationEvent piece;
  piece.text = "x";
  std::string sse = stream_event(m, piece, &offset);
  sse += stream_event(m, final_event(engine::FinishReason::kLength), &offset);
  const std::vector<Json> r = records(sse);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0]["object"], "text_completion");
  EXPECT_EQ(r[0]["choices"][0]["text"], "x");
  EXPECT_FALSE(r[0].contains("usage"));
  EXPECT_EQ(r[1]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r[2], "[DONE]");
}

TEST(OpenAiResponseTest, StreamedLogprobsCountTextOffsetsFromTheStart) {
  FakeTokenizer tokenizer;
  const ResponseMeta m = meta(Endpoint::kCompletions, &tokenizer, /*logprobs=*/true);
  size_t offset = 0;
  engine::GenerationEvent first;
  first.text = "ab";
  first.logprobs = {{letter('a'), -1.f, {}}, {letter('b'), -1.f, {}}};
  engine::GenerationEvent second;
  second.text = "c";
  second.logprobs = {{letter('c'), -1.f, {}}};
  std::string sse = stream_event(m, first, &offset);  // in order: each advances `offset`
  sse += stream_event(m, second, &offset);
  const std::vector<Json> r = records(sse);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["choices"][0]["logprobs"]["text_offset"], Json::array({0, 1}));
  EXPECT_EQ(r[1]["choices"][0]["logprobs"]["text_offset"], Json::array({2}));
  EXPECT_EQ(r[1]["choices"][0]["logprobs"]["tokens"], Json::array({"c"}));
  EXPECT_EQ(offset, 3u);
}

TEST(OpenAiResponseTest, StreamErrorEndsTheStream) {
  const std::vector<Json> r = records(stream_error(absl::UnavailableError("drain limit")));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["error"]["message"], "drain limit");
  EXPECT_EQ(r[0]["error"]["type"], "service_unavailable_error");
  EXPECT_EQ(r[1], "[DONE]");
}

TEST(OpenAiResponseTest, ModelList) {
  const Json list = Json::parse(models_json("tiny", 7));
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  EXPECT_EQ(list["data"][0]["id"], "tiny");
  EXPECT_EQ(list["data"][0]["object"], "model");
  EXPECT_EQ(Json::parse(model_json("tiny", 7)), list["data"][0]);
}

}  // namespace
}  // namespace flashserve::http
