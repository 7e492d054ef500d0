// The renderers of ChatTemplate's families (detection is in chat_template.cc). Each reproduces
// what Python's jinja2 makes of the real templates (tests/data/chat_template_jinja2.json), so
// the string helpers below follow Python's str methods, not C's.
#include <ctime>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/text/chat_template.h"
#include "model/text/jinja.h"
#include "model/text/utf8.h"

namespace flashserve::model {
namespace {

// Python's str.lstrip('\n') / rstrip('\n').
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// json.dumps(s, ensure_ascii=False): the tojson filter of transformers' template environment.
std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

// Today's UTC date as strftime("%d %b %Y") in the C locale ("01 Dec 2026").
std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof(buf), "%d %b %Y", &tm);
  return std::string(buf, n);
}

// Qwen3: an assistant turn's answer and reasoning, split at "</think>" as its template does.
struct ThinkSplit {
  std::string content;
  std::string reasoning;
};

ThinkSplit split_think(const std::string& text) {
  constexpr std::string_view kOpen = "<think>";
  constexpr std::string_view kClose = "</think>";
  const size_t first_close = text.find(kClose);
  if (first_close == std::string::npos) return {text, ""};
  const size_t last_close = text.rfind(kClose);
  ThinkSplit out;
  out.content = std::string(lstrip_newlines(std::string_view(text).substr(last_close + kClose.size())));
  std::string_view before = rstrip_newlines(std::string_view(text).substr(0, first_close));
  const size_t open = before.rfind(kOpen);
  if (open != std::string_view::npos) before.remove_prefix(open + kOpen.size());
  out.reasoning = std::string(lstrip_newlines(before));
  return out;
}

// Qwen3: index of the last user message that is not a wrapped tool response.
size_t last_query_index(std::span<const ChatMessage> messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    const bool tool_response =
        c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (messages[i].role == "user" && !tool_response) return i;
  }
  return messages.size() - 1;
}

}  // namespace

std::string ChatTemplate::render_chatml(std::span<const ChatMessage> messages, bool add_gen,
                                        const ChatRenderOptions& options) const {
  std::string out;
  const bool first_is_system = messages.front().role == "system";
  if (!default_system_.empty() && !first_is_system) {
    absl::StrAppend(&out, "<|im_start|>system\n", default_system_, "<|im_end|>\n");
  }
  const size_t last_query = last_query_index(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool generic = !qwen_tools_ || m.role == "user" || m.role == "system" ||
                         (m.role == "assistant" && !qwen3_think_);
    if (generic) {
      absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
    } else if (m.role == "assistant") {
      const ThinkSplit t = split_think(m.content);
      const bool keep = i > last_query && (i + 1 == messages.size() || !t.reasoning.empty());
      if (keep) {
        absl::StrAppend(&out, "<|im_start|>assistant\n<think>\n",
                        to_absl(rstrip_newlines(lstrip_newlines(t.reasoning))), "\n</think>\n\n",
                        to_absl(lstrip_newlines(t.content)), "<|im_end|>\n");
      } else {
        absl::StrAppend(&out, "<|im_start|>assistant\n", t.content, "<|im_end|>\n");
      }
    } else if (m.role == "tool") {
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      absl::StrAppend(&out, "\n<tool_response>\n", m.content, "\n</tool_response>");
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    }  // Qwen's templates write no other role
  }
  if (add_gen) {
    out += "<|im_start|>assistant\n";
    if (qwen3_think_ && options.enable_thinking == false) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string ChatTemplate::render_llama2(std::span<const ChatMessage> messages) const {
  std::string out = "[INST] ";
  bool inside_turn = true;  // the first "[INST] " is already written; BOS comes from the tokenizer
  for (const ChatMessage& m : messages) {
    const std::string content = llama2_strip_ ? python_strip(m.content) : m.content;
    if (!inside_turn) {
      inside_turn = true;
      out += llama2_bos_in_history_ ? "<s>[INST] " : "[INST] ";
    }
    if (m.role == "system") {
      absl::StrAppend(&out, llama2_system_block_ ? "<<SYS>>\n" : "", content,
                      llama2_system_block_ ? "\n<</SYS>>\n\n" : "\n");
    } else if (m.role == "user") {
      absl::StrAppend(&out, content, " [/INST]");
    } else {
      absl::StrAppend(&out, content, "</s>");
      inside_turn = false;
    }
  }
  return out;
}

std::string ChatTemplate::render_llama3(std::span<const ChatMessage> messages, bool add_gen,
                                        const ChatRenderOptions& options) const {
  std::string out;
  if (llama31_) {
    std::string system;
    if (messages.front().role == "system") {
      system = python_strip(messages.front().content);
      messages = messages.subspan(1);
    }
    std::string date = llama31_date_;
    if (date.empty()) date = options.today.empty() ? today_utc() : options.today;
    absl::StrAppend(&out, "<|start_header_id|>system<|end_header_id|>\n\n",
                    "Cutting Knowledge Date: December 2023\nToday Date: ", date, "\n\n", system,
                    "<|eot_id|>");
  }
  for (const ChatMessage& m : messages) {
    if (llama31_ && (m.role == "tool" || m.role == "ipython")) {
      // The template's `content is iterable` holds for a string: it is written as JSON.
      absl::StrAppend(&out, "<|start_header_id|>ipython<|end_header_id|>\n\n",
                      json_quote(m.content), "<|eot_id|>");
      continue;
    }
    absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                    python_strip(m.content), "<|eot_id|>");
  }
  if (add_gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

absl::StatusOr<std::string> ChatTemplate::render_gemma(std::span<const ChatMessage> messages,
                                                       bool add_gen) const {
  std::string first_user_prefix;
  if (messages.front().role == "system") {
    if (gemma_refuses_system_) {
      return absl::InvalidArgumentError("chat template: System role not supported (Gemma)");
    }
    first_user_prefix = messages.front().content + "\n\n";
    messages = messages.subspan(1);
  }
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if ((m.role == "user") != (i % 2 == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chat template: message ", i, " has role '", m.role,
          "': conversation roles must alternate user/assistant/user/assistant/... (Gemma)"));
    }
    const std::string_view role = m.role == "assistant" ? "model" : std::string_view(m.role);
    absl::StrAppend(&out, "<start_of_turn>", to_absl(role), "\n", i == 0 ? first_user_prefix : "",
                    python_strip(m.content), "<end_of_turn>\n");
  }
  if (add_gen) out += "<start_of_turn>model\n";
  return out;
}

std::string ChatTemplate::render_phi3(std::span<const ChatMessage> messages, bool add_gen) const {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (!phi35_) {  // Phi-3-mini: the assistant header follows every user turn
      if (m.role == "user") {
        absl::StrAppend(&out, "<|user|>\n", m.content, "<|end|>\n<|assistant|>\n");
      } else if (m.role == "assistant") {
        absl::StrAppend(&out, m.content, "<|end|>\n");
      }
      continue;
    }
    if ((m.role == "system" && !m.content.empty()) || m.role == "user" ||
        m.role == "assistant") {
      absl::StrAppend(&out, "<|", m.role, "|>\n", m.content, "<|end|>\n");
    }
  }
  if (phi35_) out += add_gen ? "<|assistant|>\n" : "<|endoftext|>";
  return out;
}

absl::StatusOr<std::string> ChatTemplate::render_jinja(std::span<const ChatMessage> messages,
                                                       bool add_gen,
                                                       const ChatRenderOptions& options) const {
  using jinja::Value;
  jinja::ValueList list;
  for (const ChatMessage& m : messages) {
    list.push_back(Value::new_map({{"role", Value::string(m.role)},
                                   {"content", Value::string(m.content)}}));
  }
  std::map<std::string, Value> globals = {
      {"messages", Value::new_list(std::move(list))},
      {"add_generation_prompt", Value::boolean(add_gen)},
      {"bos_token", Value::string("")},  // the tokenizer adds BOS
      {"eos_token", Value::string(eos_token_)}};
  if (options.enable_thinking.has_value()) {
    globals["enable_thinking"] = Value::boolean(*options.enable_thinking);
  }
  const int64_t now = options.now_unix_seconds >= 0 ? options.now_unix_seconds
                                                    : static_cast<int64_t>(std::time(nullptr));
  auto out = jinja_->render(globals, now);
  if (!out.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", out.status().message()));
  }
  return out;
}

}  // namespace flashserve::model
