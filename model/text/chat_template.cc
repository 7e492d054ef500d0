#include "model/text/chat_template.h"

#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/gguf/gguf.h"
#include "model/text/utf8.h"

namespace flashserve::model {
namespace {

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Decodes the escapes of a Jinja string literal (\n, \t, \r, \\, \', \"); other backslash
// pairs are kept as written.
std::string unescape_jinja(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '\\' || i + 1 == raw.size()) {
      out += raw[i];
      continue;
    }
    const char c = raw[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '\\': case '\'': case '"': out += c; break;
      default: out += '\\'; out += c;
    }
  }
  return out;
}

// SmolLM2 / Qwen2 style: "{% if loop.first and messages[0]['role'] != 'system' %}
// {{ '<|im_start|>system\n<default><|im_end|>\n' }}{% endif %}". Returns <default> when the
// template inserts a literal system turn of that shape, nullopt otherwise.
std::optional<std::string> chatml_default_system(std::string_view tmpl) {
  if (!contains(tmpl, "!= 'system'") && !contains(tmpl, "!= \"system\"")) return std::nullopt;
  constexpr std::string_view kHeader = "<|im_start|>system";
  const size_t at = tmpl.find(kHeader);
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  const char quote = tmpl[at - 1];
  if (quote != '\'' && quote != '"') return std::nullopt;
  std::string_view rest = tmpl.substr(at + kHeader.size());
  if (rest.starts_with("\\n")) {
    rest.remove_prefix(2);
  } else if (rest.starts_with("\n")) {
    rest.remove_prefix(1);
  } else {
    return std::nullopt;
  }
  const size_t end = rest.find("<|im_end|>");
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view raw = rest.substr(0, end);
  for (size_t i = 0; i < raw.size(); ++i) {  // must stay inside the one literal
    if (raw[i] == '\\') {
      ++i;
    } else if (raw[i] == quote) {
      return std::nullopt;
    }
  }
  return unescape_jinja(raw);
}

struct Detected {
  std::optional<ChatTemplate::Family> family;
  std::string_view unsupported;  // llama.cpp family we recognise but do not render
  std::string_view llama2_variant;
};

Detected found(ChatTemplate::Family family, std::string_view llama2_variant = {}) {
  Detected d;
  d.family = family;
  d.llama2_variant = llama2_variant;
  return d;
}

Detected unsupported(std::string_view name) {
  Detected d;
  d.unsupported = name;
  return d;
}

// llama.cpp's llm_chat_detect_template, in its order, up to the families we render.
Detected detect(std::string_view t) {
  using F = ChatTemplate::Family;
  if (contains(t, "<|im_start|>")) {
    if (contains(t, "<|im_sep|>")) return unsupported("phi4");
    if (contains(t, "<end_of_utterance>")) return unsupported("smolvlm");
    return found(F::kChatml);
  }
  if (t.starts_with("mistral") || contains(t, "[INST]")) {
    if (contains(t, "[SYSTEM_PROMPT]")) return unsupported("mistral-v7");
    if (contains(t, "' [INST] ' + system_message") || contains(t, "[AVAILABLE_TOOLS]")) {
      return unsupported("mistral-v1/v3");
    }
    if (contains(t, "content.strip()")) return found(F::kLlama2, "llama2-sys-strip");
    if (contains(t, "bos_token + '[INST]")) return found(F::kLlama2, "llama2-sys-bos");
    if (contains(t, "<<SYS>>")) return found(F::kLlama2, "llama2-sys");
    return found(F::kLlama2, "llama2");
  }
  if (contains(t, "<|assistant|>") && contains(t, "<|end|>")) return unsupported("phi3");
  if (contains(t, "[gMASK]<sop>")) return unsupported("chatglm4");
  if (contains(t, "<|assistant|>") && contains(t, "<|user|>")) {
    return unsupported(contains(t, "</s>") ? "falcon3" : "glmedge");
  }
  if (contains(t, "<|user|>") && contains(t, "<|endoftext|>")) return found(F::kZephyr);
  if (contains(t, "<|start_header_id|>") && contains(t, "<|end_header_id|>")) {
    return found(F::kLlama3);
  }
  return {};
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::from_template_text(std::string_view jinja) {
  Detected d;
  if (jinja == "chatml") {
    d.family = Family::kChatml;
  } else if (jinja == "llama2" || jinja == "llama2-sys" || jinja == "llama2-sys-bos" ||
             jinja == "llama2-sys-strip") {
    d = found(Family::kLlama2, jinja);
  } else if (jinja == "zephyr") {
    d.family = Family::kZephyr;
  } else if (jinja == "llama3") {
    d.family = Family::kLlama3;
  } else {
    d = detect(jinja);
  }
  if (!d.family.has_value()) {
    if (!d.unsupported.empty()) {
      return absl::UnimplementedError(absl::StrCat("chat template: family '", to_absl(d.unsupported),
                                                   "' is recognised but not supported"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "chat template: unrecognised chat template (supported: chatml, llama2, zephyr, "
        "llama3): '", to_absl(jinja.substr(0, 120)), jinja.size() > 120 ? "...'" : "'"));
  }
  ChatTemplate t(*d.family);
  if (t.family_ == Family::kLlama2) {
    t.llama2_system_block_ = d.llama2_variant != "llama2";
    t.llama2_bos_in_history_ = d.llama2_variant == "llama2-sys-bos";
    t.llama2_strip_ = d.llama2_variant == "llama2-sys-strip";
  }
  if (t.family_ == Family::kChatml) {
    t.default_system_ = chatml_default_system(jinja).value_or("");
  }
  return t;
}

absl::StatusOr<ChatTemplate> ChatTemplate::from_gguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(const std::string text, file.get_string("tokenizer.chat_template"));
  return from_template_text(text);
}

std::string_view ChatTemplate::family_name() const {
  switch (family_) {
    case Family::kChatml: return "chatml";
    case Family::kZephyr: return "zephyr";
    case Family::kLlama3: return "llama3";
    case Family::kLlama2:
      if (llama2_strip_) return "llama2-sys-strip";
      if (llama2_bos_in_history_) return "llama2-sys-bos";
      return llama2_system_block_ ? "llama2-sys" : "llama2";
  }
  return "unknown";
}

std::string ChatTemplate::render_chatml(std::span<const ChatMessage> messages,
                                        bool add_gen) const {
  std::string out;
  if (!default_system_.empty() && messages.front().role != "system") {
    absl::StrAppend(&out, "<|im_start|>system\n", default_system_, "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  if (add_gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string ChatTemplate::render_llama2(std::span<const ChatMessage> messages) const {
  std::string out = "[INST] ";
  bool inside_turn = true;  // the first "[INST] " is already written; BOS comes from the tokenizer
  for (const ChatMessage& m : messages) {
    const std::string content =
        llama2_strip_ ? std::string(absl::StripAsciiWhitespace(m.content)) : m.content;
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

absl::StatusOr<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                                 bool add_generation_prompt) const {
  if (messages.empty()) return absl::InvalidArgumentError("chat template: no messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("chat template: message ", i,
                                                     " has an empty role"));
    }
  }
  std::string out;
  switch (family_) {
    case Family::kChatml:
      return render_chatml(messages, add_generation_prompt);
    case Family::kLlama2:
      return render_llama2(messages);
    case Family::kZephyr:
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&out, "<|", m.role, "|>\n", m.content, "<|endoftext|>\n");
      }
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
    case Family::kLlama3:
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                        absl::StripAsciiWhitespace(m.content), "<|eot_id|>");
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
  }
  return absl::InternalError("chat template: unknown family");
}

}  // namespace flashserve::model
