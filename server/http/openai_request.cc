#include "server/http/openai_request.h"

#include <cstdint>
#include <limits>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace flashserve::http {
namespace {

using Json = nlohmann::json;

absl::Status invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// The member `key` of `body`, or null when absent or JSON null (OpenAI treats both alike).
const Json* member(const Json& body, const char* key) {
  const auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::StatusOr<std::optional<float>> number(const Json& body, const char* key) {
  const Json* v = member(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return invalid(key, "must be a number");
  return static_cast<float>(v->get<double>());
}

// An integer that fits in int64 (JSON numbers like 2.0 are refused: OpenAI's schema says
// integer).
absl::StatusOr<std::optional<int64_t>> integer(const Json& body, const char* key) {
  const Json* v = member(body, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return invalid(key, "is too large");
    }
    return static_cast<int64_t>(u);
  }
  if (!v->is_number_integer()) return invalid(key, "must be an integer");
  return v->get<int64_t>();
}

// An integer for an int32 proto field: values past int32 are out of every range we accept,
// so they are refused here with the same wording as the validation's range errors.
absl::StatusOr<std::optional<int32_t>> int32(const Json& body, const char* key) {
  ASSIGN_OR_RETURN(const std::optional<int64_t> v, integer(body, key));
  if (!v) return std::nullopt;
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    return invalid(key, absl::StrCat(*v, " is out of range"));
  }
  return static_cast<int32_t>(*v);
}

absl::StatusOr<std::optional<bool>> boolean(const Json& body, const char* key) {
  const Json* v = member(body, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return invalid(key, "must be true or false");
  return v->get<bool>();
}

// Features we do not implement: refused by name rather than silently ignored.
absl::Status refuse_unsupported(const Json& body) {
  ASSIGN_OR_RETURN(const std::optional<int64_t> n, integer(body, "n"));
  if (n && *n != 1) return invalid("n", absl::StrCat(*n, " is not supported (only n = 1)"));
  ASSIGN_OR_RETURN(const std::optional<int64_t> best_of, integer(body, "best_of"));
  if (best_of && *best_of != 1) {
    return invalid("best_of", absl::StrCat(*best_of, " is not supported (only best_of = 1)"));
  }
  ASSIGN_OR_RETURN(const std::optional<bool> echo, boolean(body, "echo"));
  if (echo.value_or(false)) return invalid("echo", "is not supported");
  if (const Json* suffix = member(body, "suffix");
      suffix != nullptr && !(suffix->is_string() && suffix->get_ref<const std::string&>().empty())) {
    return invalid("suffix", "is not supported");
  }
  for (const char* key : {"logit_bias", "tools", "functions"}) {
    const Json* v = member(body, key);
    if (v != nullptr && !v->empty()) return invalid(key, "is not supported");
  }
  if (const Json* format = member(body, "response_format"); format != nullptr) {
    const Json* type = format->is_object() ? member(*format, "type") : nullptr;
    if (type == nullptr || *type != "text") {
      return invalid("response_format", "only {\"type\": \"text\"} is supported");
    }
  }
  return absl::OkStatus();
}

absl::Status read_sampling(const Json& body, v1::SamplingParams* s) {
  ASSIGN_OR_RETURN(const std::optional<float> temperature, number(body, "temperature"));
  if (temperature) s->set_temperature(*temperature);
  ASSIGN_OR_RETURN(const std::optional<float> top_p, number(body, "top_p"));
  if (top_p) s->set_top_p(*top_p);
  ASSIGN_OR_RETURN(const std::optional<int32_t> top_k, int32(body, "top_k"));
  // -1 is how other servers (vLLM) spell "off"; ours is 0.
  if (top_k) s->set_top_k(*top_k == -1 ? 0 : *top_k);
  ASSIGN_OR_RETURN(const std::optional<float> min_p, number(body, "min_p"));
  if (min_p) s->set_min_p(*min_p);
  ASSIGN_OR_RETURN(const std::optional<float> repetition, number(body, "repetition_penalty"));
  if (repetition) s->set_repetition_penalty(*repetition);
  ASSIGN_OR_RETURN(const std::optional<float> presence, number(body, "presence_penalty"));
  if (presence) s->set_presence_penalty(*presence);
  ASSIGN_OR_RETURN(const std::optional<float> frequency, number(body, "frequency_penalty"));
  if (frequency) s->set_frequency_penalty(*frequency);
  ASSIGN_OR_RETURN(const std::optional<int64_t> seed, integer(body, "seed"));
  if (seed) {
    if (*seed < 0) return invalid("seed", absl::StrCat(*seed, " is negative"));
    s->set_seed(static_cast<uint64_t>(*seed));
  }
  return absl::OkStatus();
}

absl::Status read_stopping(const Json& body, OpenAiRequest* out) {
  v1::StoppingCriteria* stopping = out->request.mutable_stopping();
  // Chat's newer name wins over the older one when both are given.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    ASSIGN_OR_RETURN(const std::optional<int32_t> max_tokens, int32(body, key));
    if (!max_tokens) continue;
    stopping->set_max_new_tokens(*max_tokens);
    out->max_tokens_field = key;
  }
  if (const Json* stop = member(body, "stop"); stop != nullptr) {
    if (stop->is_string()) {
      stopping->add_stop(stop->get<std::string>());
    } else if (stop->is_array()) {
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string()) return invalid(absl::StrCat("stop[", i, "]"), "must be a string");
        stopping->add_stop((*stop)[i].get<std::string>());
      }
    } else {
      return invalid("stop", "must be a string or a list of strings");
    }
  }
  if (const Json* ids = member(body, "stop_token_ids"); ids != nullptr) {
    if (!ids->is_array()) return invalid("stop_token_ids", "must be a list of integers");
    for (size_t i = 0; i < ids->size(); ++i) {
      const Json& id = (*ids)[i];
      if (!id.is_number_integer() || id.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return invalid(absl::StrCat("stop_token_ids[", i, "]"), "must be a 32-bit integer");
      }
      stopping->add_stop_token_ids(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  ASSIGN_OR_RETURN(const std::optional<bool> ignore_eos, boolean(body, "ignore_eos"));
  stopping->set_ignore_eos(ignore_eos.value_or(false));
  return absl::OkStatus();
}

absl::Status read_logprobs(const Json& body, OpenAiRequest* out) {
  v1::GenerateRequest& r = out->request;
  if (out->endpoint == Endpoint::kCompletions) {
    // Completions: logprobs = N returns the sampled token's logprob and N alternatives.
    ASSIGN_OR_RETURN(const std::optional<int32_t> n, int32(body, "logprobs"));
    if (n) {
      r.set_logprobs(true);
      r.set_top_logprobs(*n);
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const std::optional<bool> logprobs, boolean(body, "logprobs"));
  r.set_logprobs(logprobs.value_or(false));
  ASSIGN_OR_RETURN(const std::optional<int32_t> top, int32(body, "top_logprobs"));
  if (top) r.set_top_logprobs(*top);
  return absl::OkStatus();
}

// A prompt: a string, a list of token ids, or a batch of one of them.
absl::Status read_prompt(const Json& body, v1::GenerateRequest* r) {
  const Json* prompt = member(body, "prompt");
  if (prompt == nullptr) return invalid("prompt", "is required");
  if (prompt->is_array() && prompt->size() == 1 &&
      ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    prompt = &(*prompt)[0];  // a batch of one
  }
  if (prompt->is_string()) {
    r->set_prompt(prompt->get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt->is_array()) return invalid("prompt", "must be a string or a list of token ids");
  if (!prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array())) {
    return invalid("prompt", "a batch of prompts is not supported; send one per request");
  }
  v1::TokenIdList* ids = r->mutable_token_ids();
  for (size_t i = 0; i < prompt->size(); ++i) {
    const Json& id = (*prompt)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return invalid(absl::StrCat("prompt[", i, "]"), "must be a token id");
    }
    ids->add_ids(static_cast<int32_t>(id.get<int64_t>()));
  }
  return absl::OkStatus();
}

// A message's content: a string or a list of text parts (concatenated).
absl::StatusOr<std::string> message_content(const Json& message, const std::string& field) {
  const Json* content = member(message, "content");
  if (content == nullptr) return invalid(absl::StrCat(field, ".content"), "is required");
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    return invalid(absl::StrCat(field, ".content"), "must be a string or a list of text parts");
  }
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_field = absl::StrCat(field, ".content[", i, "]");
    const Json* type = part.is_object() ? member(part, "type") : nullptr;
    if (type == nullptr || *type != "text") {
      return invalid(part_field, "only parts of type \"text\" are supported");
    }
    const Json* part_text = member(part, "text");
    if (part_text == nullptr || !part_text->is_string()) {
      return invalid(absl::StrCat(part_field, ".text"), "must be a string");
    }
    text += part_text->get<std::string>();
  }
  return text;
}

absl::Status read_messages(const Json& body, v1::GenerateRequest* r) {
  const Json* messages = member(body, "messages");
  if (messages == nullptr) return invalid("messages", "is required");
  if (!messages->is_array()) return invalid("messages", "must be a list of messages");
  v1::ChatInput* chat = r->mutable_chat();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!message.is_object()) return invalid(field, "must be an object");
    const Json* role = member(message, "role");
    if (role == nullptr || !role->is_string()) {
      return invalid(absl::StrCat(field, ".role"), "must be a string");
    }
    ASSIGN_OR_RETURN(std::string content, message_content(message, field));
    v1::ChatMessage* m = chat->add_messages();
    m->set_role(role->get<std::string>());
    m->set_content(std::move(content));
  }
  return absl::OkStatus();
}

absl::Status read_stream(const Json& body, OpenAiRequest* out) {
  ASSIGN_OR_RETURN(const std::optional<bool> stream, boolean(body, "stream"));
  out->stream = stream.value_or(false);
  const Json* options = member(body, "stream_options");
  if (options == nullptr) return absl::OkStatus();
  if (!out->stream) return invalid("stream_options", "is only allowed with stream = true");
  if (!options->is_object()) return invalid("stream_options", "must be an object");
  ASSIGN_OR_RETURN(const std::optional<bool> usage, boolean(*options, "include_usage"));
  out->include_usage = usage.value_or(false);
  return absl::OkStatus();
}

// Proto paths of the shared validation -> this API's field names, longest prefix first.
struct Rename {
  absl::string_view proto;
  absl::string_view completions;
  absl::string_view chat;
};
constexpr Rename kRenames[] = {
    {"sampling.", "", ""},
    {"stopping.max_new_tokens", "", ""},  // the key the request used (max_tokens_field)
    {"stopping.", "", ""},
    {"chat.messages", "messages", "messages"},
    {"chat", "messages", "messages"},
    {"token_ids.ids", "prompt", "prompt"},
    {"top_logprobs", "logprobs", "top_logprobs"},
    {"input", "prompt", "messages"},
};

// The body as JSON, or InvalidArgument naming where and why it is not JSON ("body: is not
// valid JSON: parse error at line 1, column 32: syntax error while parsing value - unexpected
// '}'; expected ...").
absl::StatusOr<Json> parse_json(absl::string_view body) {
  try {
    return Json::parse(body);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for 1e999
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 32: ...".
    absl::string_view what = e.what();
    if (const size_t at = what.find("] "); at != absl::string_view::npos) {
      what.remove_prefix(at + 2);
    }
    return invalid("body", absl::StrCat("is not valid JSON: ", what));
  }
}

}  // namespace

absl::StatusOr<OpenAiRequest> parse_openai_request(Endpoint endpoint, absl::string_view body) {
  ASSIGN_OR_RETURN(const Json json, parse_json(body));
  if (!json.is_object()) return invalid("body", "must be a JSON object");
  OpenAiRequest out;
  out.endpoint = endpoint;
  if (const Json* model = member(json, "model"); model != nullptr) {
    if (!model->is_string()) return invalid("model", "must be a string");
    out.model = model->get<std::string>();
  }
  RETURN_IF_ERROR(refuse_unsupported(json));
  RETURN_IF_ERROR(read_stream(json, &out));
  if (endpoint == Endpoint::kCompletions) {
    RETURN_IF_ERROR(read_prompt(json, &out.request));
  } else {
    RETURN_IF_ERROR(read_messages(json, &out.request));
  }
  RETURN_IF_ERROR(read_sampling(json, out.request.mutable_sampling()));
  RETURN_IF_ERROR(read_stopping(json, &out));
  RETURN_IF_ERROR(read_logprobs(json, &out));
  return out;
}

absl::Status openai_field_names(const absl::Status& status, const OpenAiRequest& request) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return status;
  const absl::string_view message = status.message();
  for (const Rename& r : kRenames) {
    if (!absl::StartsWith(message, r.proto)) continue;
    absl::string_view name =
        request.endpoint == Endpoint::kCompletions ? r.completions : r.chat;
    std::string renamed;
    if (r.proto == "stopping.max_new_tokens") {
      // Also in the message's text ("... + max_new_tokens 9000 exceed ...").
      renamed = absl::StrCat(request.max_tokens_field,
                             absl::StrReplaceAll(message.substr(r.proto.size()),
                                                 {{"max_new_tokens", request.max_tokens_field}}));
    } else {
      renamed = absl::StrCat(name, message.substr(r.proto.size()));
    }
    return absl::InvalidArgumentError(renamed);
  }
  return status;
}

std::string error_param(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kInvalidArgument) return "";
  const absl::string_view message = status.message();
  const size_t colon = message.find(": ");
  if (colon == absl::string_view::npos || colon == 0) return "";
  const absl::string_view field = message.substr(0, colon);
  if (field.find(' ') != absl::string_view::npos) return "";  // a sentence, not a field
  return std::string(field);
}

}  // namespace flashserve::http
