#pragma once
// The OpenAI request bodies (POST /v1/completions, /v1/chat/completions) as our
// v1::GenerateRequest, so that the HTTP API is validated by the same rules and limits as gRPC
// (server/api/validation.h, then server/api/prompt.h) — this file only reads JSON.
//
// What it checks itself is what JSON adds: the body is an object, each field has its JSON type
// ("temperature: must be a number"), and the features we do not implement are refused by name
// (n > 1, best_of > 1, echo, suffix, logit_bias, tools, response_format other than text, a
// batch of prompts) instead of being silently ignored. Unknown fields are ignored, as OpenAI's
// own clients send some (user, metadata). Every error is InvalidArgument "<field>: <problem>"
// with the field in OpenAI's spelling.
//
// Spelling of the shared rules' errors: validation names proto paths ("sampling.top_p",
// "stopping.stop[0]", "chat.messages[1].role"); openai_field_names() rewrites such a status
// into this API's names ("top_p", "stop[0]", "messages[1].role").
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "flashserve/v1/generation.pb.h"

namespace flashserve::http {

enum class Endpoint { kCompletions, kChatCompletions };

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;           // empty when the body names none
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Completions: `logprobs` is the number of alternatives; chat: `top_logprobs`.
  v1::GenerateRequest request;
  // Which key set request.stopping.max_new_tokens ("max_tokens" or "max_completion_tokens").
  std::string max_tokens_field = "max_tokens";
};

// Parses a request body. InvalidArgument naming the field on any problem.
absl::StatusOr<OpenAiRequest> parse_openai_request(Endpoint endpoint, absl::string_view body);

// A status of the shared validation (proto field paths) with the field renamed to this API's
// spelling; other statuses unchanged.
absl::Status openai_field_names(const absl::Status& status, const OpenAiRequest& request);

// The field an InvalidArgument message starts with ("top_p" of "top_p: 2 is out of range"),
// for the error body's `param`; empty when there is none.
std::string error_param(const absl::Status& status);

}  // namespace flashserve::http
