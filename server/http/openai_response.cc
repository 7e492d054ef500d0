#include "server/http/openai_response.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "model/text/utf8.h"
#include "nlohmann/json.hpp"

namespace flashserve::http {
namespace {

using Json = nlohmann::json;

// Never throws: text that is not UTF-8 (cannot happen for the engine's text) is replaced.
std::string dump(const Json& json) {
  return json.dump(-1, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

std::string sse(const Json& json) { return absl::StrCat("data: ", dump(json), "\n\n"); }

constexpr char kDone[] = "data: [DONE]\n\n";

const char* error_type(int http) {
  switch (http) {
    case 400:
    case 405:
    case 413: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    case 504: return "timeout_error";
    default: return "server_error";
  }
}

Json usage_json(const engine::Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

// A token's text as the client sees it: its bytes, made valid UTF-8 (a byte-fallback token
// may hold part of a character; `bytes` carries the exact ones).
std::string token_text(const model::Tokenizer& tokenizer, int32_t id) {
  return model::sanitize_utf8(tokenizer.token_bytes(id));
}

Json token_bytes(const model::Tokenizer& tokenizer, int32_t id) {
  Json bytes = Json::array();
  for (const char c : tokenizer.token_bytes(id)) bytes.push_back(static_cast<uint8_t>(c));
  return bytes;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}.
Json chat_logprobs(const ResponseMeta& meta, const std::vector<engine::TokenLogprob>& logprobs) {
  Json content = Json::array();
  for (const engine::TokenLogprob& lp : logprobs) {
    Json top = Json::array();
    for (const auto& [token, logprob] : lp.top) {
      top.push_back({{"token", token_text(*meta.tokenizer, token)},
                     {"logprob", logprob},
                     {"bytes", token_bytes(*meta.tokenizer, token)}});
    }
    content.push_back({{"token", token_text(*meta.tokenizer, lp.token)},
                       {"logprob", lp.logprob},
                       {"bytes", token_bytes(*meta.tokenizer, lp.token)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

// Completions (the legacy shape): parallel lists tokens / token_logprobs / top_logprobs /
// text_offset, the offsets counted in bytes from `offset`.
Json completion_logprobs(const ResponseMeta& meta,
                         const std::vector<engine::TokenLogprob>& logprobs, size_t offset) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array(),
       offsets = Json::array();
  for (const engine::TokenLogprob& lp : logprobs) {
    const std::string text = token_text(*meta.tokenizer, lp.token);
    tokens.push_back(text);
    token_logprobs.push_back(lp.logprob);
    Json alternatives = Json::object();
    for (const auto& [token, logprob] : lp.top) {
      alternatives[token_text(*meta.tokenizer, token)] = logprob;
    }
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

// `offset`: the completion's text bytes before these tokens (a stream's earlier records).
Json logprobs_json(const ResponseMeta& meta, const std::vector<engine::TokenLogprob>& logprobs,
                   size_t offset = 0) {
  if (!meta.logprobs || meta.tokenizer == nullptr) return nullptr;
  return meta.endpoint == Endpoint::kChatCompletions ? chat_logprobs(meta, logprobs)
                                                     : completion_logprobs(meta, logprobs, offset);
}

Json envelope(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

// One streamed choice: a chat delta or a completion's text piece.
Json stream_chunk(const ResponseMeta& meta, const Json& delta_or_text, const Json& logprobs,
                  const Json& finish_reason) {
  const bool chat = meta.endpoint == Endpoint::kChatCompletions;
  Json chunk = envelope(meta, chat ? "chat.completion.chunk" : "text_completion");
  Json choice = {{"index", 0}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  choice[chat ? "delta" : "text"] = delta_or_text;
  chunk["choices"] = Json::array({std::move(choice)});
  if (meta.include_usage) chunk["usage"] = nullptr;  // OpenAI: null until the last chunk
  return chunk;
}

}  // namespace

int http_status(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kResourceExhausted: return 429;
    case absl::StatusCode::kUnimplemented: return 501;
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

std::string error_json(const absl::Status& status, int http) {
  const std::string param = error_param(status);
  if (http == 0) http = http_status(status);
  Json error = {{"message", std::string(status.message())},
                {"type", error_type(http)},
                {"param", param.empty() ? Json(nullptr) : Json(param)},
                {"code", http == 404 && absl::StrContains(status.message(), "model")
                             ? Json("model_not_found")
                             : Json(nullptr)}};
  return dump(Json{{"error", std::move(error)}});
}

ResponseMeta make_meta(const OpenAiRequest& request, uint64_t request_id,
                       const std::string& model_name, const model::Tokenizer* tokenizer) {
  ResponseMeta meta;
  meta.endpoint = request.endpoint;
  meta.id = absl::StrCat(request.endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-",
                         request_id);
  meta.created = absl::ToUnixSeconds(absl::Now());
  meta.model = model_name;
  meta.tokenizer = tokenizer;
  meta.logprobs = request.request.logprobs();
  meta.include_usage = request.include_usage;
  return meta;
}

const char* openai_finish_reason(engine::FinishReason reason) {
  return reason == engine::FinishReason::kLength ? "length" : "stop";
}

absl::Status final_error(const engine::GenerationEvent& event) {
  switch (event.finish_reason) {
    case engine::FinishReason::kStop:
    case engine::FinishReason::kLength:
    case engine::FinishReason::kStopSequence: return absl::OkStatus();
    case engine::FinishReason::kCancelled:
      return absl::UnavailableError("cancelled by the server (shutting down)");
    case engine::FinishReason::kDeadlineExceeded:
      return absl::DeadlineExceededError(
          absl::StrCat("deadline exceeded after ", event.usage.completion_tokens,
                       " generated tokens"));
    case engine::FinishReason::kError: break;
  }
  return event.status.ok() ? absl::InternalError("generation failed") : event.status;
}

std::string completion_json(const ResponseMeta& meta, const Gathered& gathered,
                            const engine::GenerationEvent& final_event) {
  const bool chat = meta.endpoint == Endpoint::kChatCompletions;
  Json body = envelope(meta, chat ? "chat.completion" : "text_completion");
  Json choice = {{"index", 0},
                 {"logprobs", logprobs_json(meta, gathered.logprobs)},
                 {"finish_reason", openai_finish_reason(final_event.finish_reason)}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", gathered.text}};
  } else {
    choice["text"] = gathered.text;
  }
  body["choices"] = Json::array({std::move(choice)});
  body["usage"] = usage_json(final_event.usage);
  return dump(body);
}

std::string stream_start(const ResponseMeta& meta) {
  if (meta.endpoint != Endpoint::kChatCompletions) return "";
  return sse(stream_chunk(meta, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
}

std::string stream_event(const ResponseMeta& meta, const engine::GenerationEvent& event,
                         size_t* text_offset) {
  const bool chat = meta.endpoint == Endpoint::kChatCompletions;
  std::string out;
  const bool has_logprobs = meta.logprobs && !event.logprobs.empty();
  if (!event.text.empty() || has_logprobs) {
    const Json piece = chat ? Json{{"content", event.text}} : Json(event.text);
    const Json logprobs =
        has_logprobs ? logprobs_json(meta, event.logprobs, *text_offset) : Json(nullptr);
    *text_offset += event.text.size();
    out += sse(stream_chunk(meta, piece, logprobs, nullptr));
  }
  if (!event.finished) return out;
  const Json empty = chat ? Json::object() : Json("");
  out += sse(stream_chunk(meta, empty, nullptr, openai_finish_reason(event.finish_reason)));
  if (meta.include_usage) {
    Json usage = envelope(meta, chat ? "chat.completion.chunk" : "text_completion");
    usage["choices"] = Json::array();
    usage["usage"] = usage_json(event.usage);
    out += sse(usage);
  }
  out += kDone;
  return out;
}

std::string stream_error(const absl::Status& status) {
  return absl::StrCat("data: ", error_json(status), "\n\n", kDone);
}

namespace {
Json model_object(const std::string& model_name, int64_t created) {
  return {{"id", model_name}, {"object", "model"}, {"created", created},
          {"owned_by", "flashserve"}};
}
}  // namespace

std::string models_json(const std::string& model_name, int64_t created) {
  return dump(Json{{"object", "list"},
                   {"data", Json::array({model_object(model_name, created)})}});
}

std::string model_json(const std::string& model_name, int64_t created) {
  return dump(model_object(model_name, created));
}

}  // namespace flashserve::http
