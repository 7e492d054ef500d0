#include "server/api/validation.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace flashserve::api {
namespace {

absl::Status invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// The shortest text that reads back as exactly `value` ("100.00001", not "100"), so a value
// just past a bound never prints as the bound itself.
std::string exact(float value) {
  if (std::isnan(value)) return "nan";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, result.ptr);
}

// `value` must be finite and in [lo, hi] (or (lo, hi] when lo_open).
absl::Status check_range(absl::string_view field, float value, float lo, float hi,
                         bool lo_open = false) {
  const bool below = lo_open ? !(value > lo) : !(value >= lo);
  if (!std::isfinite(value) || below || value > hi) {
    return invalid(field, absl::StrCat(exact(value), " is out of range ", lo_open ? "(" : "[",
                                       exact(lo), ", ", exact(hi), "]"));
  }
  return absl::OkStatus();
}

}  // namespace

bool is_known_role(absl::string_view role) {
  return role == "system" || role == "user" || role == "assistant";
}

absl::Status validate_token_ids(const google::protobuf::RepeatedField<int32_t>& ids,
                                int vocab_size, absl::string_view field) {
  for (int i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return invalid(absl::StrCat(field, "[", i, "]"),
                     absl::StrFormat("unknown token id %d (vocabulary has %d tokens)", ids[i],
                                     vocab_size));
    }
  }
  return absl::OkStatus();
}

absl::Status validate_chat(const v1::ChatInput& chat, const RequestLimits& limits) {
  if (chat.messages().empty()) return invalid("chat.messages", "at least one message is required");
  if (chat.messages_size() > limits.max_chat_messages) {
    return invalid("chat.messages", absl::StrFormat("%d messages, at most %d are accepted",
                                                    chat.messages_size(),
                                                    limits.max_chat_messages));
  }
  size_t num_bytes = 0;
  for (int i = 0; i < chat.messages_size(); ++i) {
    const v1::ChatMessage& message = chat.messages(i);
    const std::string field = absl::StrCat("chat.messages[", i, "]");
    if (!is_known_role(message.role())) {
      return invalid(absl::StrCat(field, ".role"),
                     absl::StrCat("unknown role '", message.role(),
                                  "' (expected system, user or assistant)"));
    }
    if (message.content().empty()) return invalid(absl::StrCat(field, ".content"), "is empty");
    num_bytes += message.content().size();
  }
  if (num_bytes > static_cast<size_t>(limits.max_input_bytes)) {
    return invalid("chat.messages", absl::StrFormat("contents total %d bytes, at most %d",
                                                    num_bytes, limits.max_input_bytes));
  }
  return absl::OkStatus();
}

absl::Status validate_sampling(const v1::SamplingParams& s, const RequestLimits& limits) {
  if (s.has_temperature()) {
    RETURN_IF_ERROR(check_range("sampling.temperature", s.temperature(), 0.f, kMaxTemperature));
  }
  if (s.top_k() < 0 || s.top_k() > limits.vocab_size) {
    return invalid("sampling.top_k", absl::StrFormat("%d is out of range [0, %d]", s.top_k(),
                                                     limits.vocab_size));
  }
  if (s.has_top_p()) {
    RETURN_IF_ERROR(check_range("sampling.top_p", s.top_p(), 0.f, 1.f, /*lo_open=*/true));
  }
  RETURN_IF_ERROR(check_range("sampling.min_p", s.min_p(), 0.f, 1.f));
  if (s.has_repetition_penalty()) {
    RETURN_IF_ERROR(check_range("sampling.repetition_penalty", s.repetition_penalty(), 0.f,
                                kMaxRepetitionPenalty, /*lo_open=*/true));
  }
  RETURN_IF_ERROR(check_range("sampling.presence_penalty", s.presence_penalty(),
                              -kMaxAbsPenalty, kMaxAbsPenalty));
  return check_range("sampling.frequency_penalty", s.frequency_penalty(),
                     -kMaxAbsPenalty, kMaxAbsPenalty);
}

absl::Status validate_stopping(const v1::StoppingCriteria& stopping,
                               const RequestLimits& limits) {
  if (stopping.has_max_new_tokens()) {
    const int n = stopping.max_new_tokens();
    if (n < 1 || n > limits.max_new_tokens) {
      return invalid("stopping.max_new_tokens",
                     absl::StrFormat("%d is out of range [1, %d]", n, limits.max_new_tokens));
    }
  }
  if (stopping.stop_size() > limits.max_stop_strings) {
    return invalid("stopping.stop", absl::StrFormat("%d stop strings, at most %d",
                                                    stopping.stop_size(),
                                                    limits.max_stop_strings));
  }
  for (int i = 0; i < stopping.stop_size(); ++i) {
    const std::string& stop = stopping.stop(i);
    const std::string field = absl::StrCat("stopping.stop[", i, "]");
    if (stop.empty()) return invalid(field, "is empty");
    if (stop.size() > static_cast<size_t>(limits.max_stop_string_length)) {
      return invalid(field, absl::StrFormat("is %d bytes long, at most %d", stop.size(),
                                            limits.max_stop_string_length));
    }
  }
  if (stopping.stop_token_ids_size() > limits.max_stop_token_ids) {
    return invalid("stopping.stop_token_ids",
                   absl::StrFormat("%d ids, at most %d", stopping.stop_token_ids_size(),
                                   limits.max_stop_token_ids));
  }
  return validate_token_ids(stopping.stop_token_ids(), limits.vocab_size,
                            "stopping.stop_token_ids");
}

absl::Status validate_generate_request(const v1::GenerateRequest& request,
                                       const RequestLimits& limits) {
  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt:
      if (request.prompt().empty()) return invalid("prompt", "is empty");
      if (request.prompt().size() > static_cast<size_t>(limits.max_input_bytes)) {
        return invalid("prompt", absl::StrFormat("is %d bytes, at most %d",
                                                 request.prompt().size(),
                                                 limits.max_input_bytes));
      }
      break;
    case v1::GenerateRequest::kChat:
      RETURN_IF_ERROR(validate_chat(request.chat(), limits));
      break;
    case v1::GenerateRequest::kTokenIds:
      if (request.token_ids().ids().empty()) return invalid("token_ids.ids", "is empty");
      if (request.token_ids().ids_size() > limits.context_length) {
        return invalid("token_ids.ids",
                       absl::StrFormat("%d tokens exceed the context length %d",
                                       request.token_ids().ids_size(), limits.context_length));
      }
      RETURN_IF_ERROR(
          validate_token_ids(request.token_ids().ids(), limits.vocab_size, "token_ids.ids"));
      break;
    case v1::GenerateRequest::INPUT_NOT_SET:
      return invalid("input", "one of prompt, chat or token_ids is required");
  }
  RETURN_IF_ERROR(validate_sampling(request.sampling(), limits));
  RETURN_IF_ERROR(validate_stopping(request.stopping(), limits));
  if (request.top_logprobs() < 0 || request.top_logprobs() > limits.max_top_logprobs) {
    return invalid("top_logprobs", absl::StrFormat("%d is out of range [0, %d]",
                                                   request.top_logprobs(),
                                                   limits.max_top_logprobs));
  }
  if (request.top_logprobs() > 0 && !request.logprobs()) {
    return invalid("top_logprobs", "needs logprobs = true");
  }
  return absl::OkStatus();
}

}  // namespace flashserve::api
