#pragma once
// The OpenAI response bodies built from the engine's events: whole completions, server-sent
// event chunks, the model list, and errors in OpenAI's shape
//
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "top_p", "code": null}}
//
// with the HTTP status of each absl::StatusCode (http_status()). Pure functions: no sockets,
// no engine; unit-tested in tests/unit/http.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/text/tokenizer.h"
#include "server/engine/engine.h"
#include "server/http/openai_request.h"

namespace flashserve::http {

// The HTTP status of a refusal or failure: InvalidArgument / OutOfRange / FailedPrecondition
// 400, Unauthenticated 401, PermissionDenied 403, NotFound 404, ResourceExhausted 429 (the
// waiting queue is full; retry later), Unavailable 503 (loading, draining, stalled),
// DeadlineExceeded 504, Unimplemented 501, anything else 500.
int http_status(const absl::Status& status);
// {"error": {...}} for `status` (not OK), with `param` from error_param() and the `type` of
// the HTTP status it is answered with (`http`; 0 = http_status(status)).
std::string error_json(const absl::Status& status, int http = 0);

// What identifies one response: "cmpl-7" / "chatcmpl-7", the Unix time it was created, the
// model name.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;
  int64_t created = 0;
  std::string model;
  // Detokenizes logprob tokens (their text and bytes); must outlive the calls.
  const model::Tokenizer* tokenizer = nullptr;
  bool logprobs = false;       // the request asked for logprobs
  bool include_usage = false;  // stream_options.include_usage
};

ResponseMeta make_meta(const OpenAiRequest& request, uint64_t request_id,
                       const std::string& model_name, const model::Tokenizer* tokenizer);

// "stop" for stop/stop sequence/end of generation, "length" for max_tokens/context.
const char* openai_finish_reason(engine::FinishReason reason);
// OK when the final event ended the request normally (stop, stop sequence, length); else the
// error to answer with: Unavailable for a server-side cancel (shutdown), DeadlineExceeded,
// or the event's status (Internal when it has none).
absl::Status final_error(const engine::GenerationEvent& final_event);

// A whole completion (stream = false) from the gathered text and logprobs and the final event.
struct Gathered {
  std::string text;
  std::vector<engine::TokenLogprob> logprobs;
};
std::string completion_json(const ResponseMeta& meta, const Gathered& gathered,
                            const engine::GenerationEvent& final_event);

// Server-sent events. Each returns whole "data: ...\n\n" records (possibly none).
// The first record of a chat stream (the assistant role, OpenAI's first chunk).
std::string stream_start(const ResponseMeta& meta);
// An event's text and logprobs; nothing when it has neither. For the final event this also
// carries the finish reason, then the usage record (include_usage) and "data: [DONE]".
// `text_offset`: bytes of text streamed so far (completions' logprobs.text_offset counts
// from the start of the completion); advanced past this event's text.
std::string stream_event(const ResponseMeta& meta, const engine::GenerationEvent& event,
                         size_t* text_offset);
// A failed stream's last records: the error object, then "data: [DONE]".
std::string stream_error(const absl::Status& status);

// GET /v1/models: the one model this server serves; GET /v1/models/{model}: that model.
std::string models_json(const std::string& model_name, int64_t created);
std::string model_json(const std::string& model_name, int64_t created);

}  // namespace flashserve::http
