#include "model/text/chat_template.h"

#include <initializer_list>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/gguf/gguf.h"
#include "model/text/jinja.h"
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
  if (!contains(tmpl, "!= 'system'") && !contains(tmpl, "!= \"system\"") &&
      !contains(tmpl, "== 'system'") && !contains(tmpl, "== \"system\"")) {
    return std::nullopt;
  }
  constexpr std::string_view kHeader = "<|im_start|>system";
  for (size_t at = tmpl.find(kHeader); at != std::string_view::npos;
       at = tmpl.find(kHeader, at + 1)) {
    if (at == 0) continue;
    const char quote = tmpl[at - 1];
    if (quote != '\'' && quote != '"') continue;
    std::string_view rest = tmpl.substr(at + kHeader.size());
    if (rest.starts_with("\\n")) {
      rest.remove_prefix(2);
    } else if (rest.starts_with("\n")) {
      rest.remove_prefix(1);
    } else {
      continue;
    }
    const size_t end = rest.find("<|im_end|>");
    if (end == std::string_view::npos) continue;
    const std::string_view raw = rest.substr(0, end);
    bool inside_literal = true;  // the text must stay inside the one literal
    for (size_t i = 0; i < raw.size() && inside_literal; ++i) {
      if (raw[i] == '\\') {
        ++i;
      } else if (raw[i] == quote) {
        inside_literal = false;
      }
    }
    if (inside_literal) return unescape_jinja(raw);
  }
  return std::nullopt;
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
  if (contains(t, "<|assistant|>") && contains(t, "<|end|>")) return found(F::kPhi3);
  if (contains(t, "[gMASK]<sop>")) return unsupported("chatglm4");
  if (contains(t, "<|assistant|>") && contains(t, "<|user|>")) {
    return unsupported(contains(t, "</s>") ? "falcon3" : "glmedge");
  }
  if (contains(t, "<|user|>") && contains(t, "<|endoftext|>")) return found(F::kZephyr);
  if (contains(t, "<|start_header_id|>") && contains(t, "<|end_header_id|>")) {
    return found(F::kLlama3);
  }
  if (contains(t, "<start_of_turn>")) return found(F::kGemma);
  return {};
}

// Qwen3's rendering of an assistant turn with its reasoning, verbatim.
constexpr std::string_view kQwen3Think =
    R"('\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n'))";

// Text in a ChatML template that means output our renderer does not reproduce (found on the
// templates of tests/data/chat_template_jinja2.json): trimmed or macro-built content (Hermes,
// Nemotron, Qwen3-Coder, Qwen3.5), SmolLM3's metadata block, LFM2's tool tokens, MiniCPM5's
// tool definitions.
constexpr std::string_view kChatmlForeign[] = {
    "trim", "macro", "Reasoning Mode", "<|tool_response_start|>", "keep_past_thinking",
    "<tool_def_sep>"};

// Unimplemented naming the first marker of `markers` that `jinja` contains.
absl::Status refuse_markers(std::string_view jinja, std::string_view family,
                            std::span<const std::string_view> markers) {
  for (std::string_view m : markers) {
    if (contains(jinja, m)) {
      return absl::UnimplementedError(absl::StrCat(
          "chat template: a ", to_absl(family), " template with '", to_absl(m),
          "' renders differently from our ", to_absl(family), " renderer; not supported"));
    }
  }
  return absl::OkStatus();
}
absl::Status refuse_markers(std::string_view jinja, std::string_view family,
                            std::initializer_list<std::string_view> markers) {
  return refuse_markers(jinja, family, std::span<const std::string_view>(markers.begin(), markers.size()));
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::from_template_text(std::string_view jinja,
                                                              std::string_view eos_token) {
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
  } else if (jinja == "gemma") {
    d.family = Family::kGemma;
  } else if (jinja == "phi3") {
    d.family = Family::kPhi3;
  } else {
    d = detect(jinja);
  }
  if (!d.family.has_value()) {
    if (!d.unsupported.empty()) {
      return from_interpreter(jinja, eos_token, absl::UnimplementedError(absl::StrCat(
          "chat template: family '", to_absl(d.unsupported), "' is recognised but not supported")));
    }
    return from_interpreter(jinja, eos_token, absl::InvalidArgumentError(absl::StrCat(
        "chat template: unrecognised chat template (supported: chatml, llama2, zephyr, "
        "llama3, gemma, phi3): '", to_absl(jinja.substr(0, 120)), jinja.size() > 120 ? "...'" : "'")));
  }
  ChatTemplate t(*d.family);
  if (t.family_ == Family::kLlama2) {
    t.llama2_system_block_ = d.llama2_variant != "llama2";
    t.llama2_bos_in_history_ = d.llama2_variant == "llama2-sys-bos";
    t.llama2_strip_ = d.llama2_variant == "llama2-sys-strip";
  }
  if (absl::Status variant = t.detect_variants(jinja); !variant.ok()) {
    return from_interpreter(jinja, eos_token, variant);
  }
  return t;
}

absl::StatusOr<ChatTemplate> ChatTemplate::from_interpreter(std::string_view jinja,
                                                            std::string_view eos_token,
                                                            const absl::Status& family_error) {
  auto parsed = jinja::JinjaTemplate::parse(jinja);
  if (!parsed.ok()) {
    return absl::Status(family_error.code(),
                        absl::StrCat(family_error.message(), "; our Jinja interpreter: ",
                                     parsed.status().message()));
  }
  ChatTemplate t(Family::kJinja);
  t.jinja_ = std::make_shared<const jinja::JinjaTemplate>(*std::move(parsed));
  t.eos_token_ = std::string(eos_token);
  // Trial conversations: a template that needs what we do not implement fails here, at load,
  // not on a request. One of them must render, with the last user message in the text (a
  // template may refuse a system message, as Gemma 2's does, and still serve the others; a
  // template that drops the messages, such as an empty one, is no chat template).
  constexpr std::string_view kLastUser = "flashserve-trial-question";
  const std::vector<std::vector<ChatMessage>> trials = {
      {{"system", "s"}, {"user", "u"}, {"assistant", "a"}, {"user", std::string(kLastUser)}},
      {{"user", "u"}, {"assistant", "a"}, {"user", std::string(kLastUser)}}};
  ChatRenderOptions options;
  options.now_unix_seconds = 0;
  absl::Status last;
  for (const std::vector<ChatMessage>& trial : trials) {
    auto r = t.render_jinja(trial, true, options);
    if (r.ok() && contains(*r, kLastUser)) return t;
    last = r.ok() ? absl::InvalidArgumentError("the rendered trial conversation lacks its last "
                                               "user message")
                  : r.status();
  }
  return absl::Status(family_error.code(), absl::StrCat(family_error.message(),
                                                        "; our Jinja interpreter: ", last.message()));
}

absl::Status ChatTemplate::detect_variants(std::string_view jinja) {
  switch (family_) {
    case Family::kChatml:
      default_system_ = chatml_default_system(jinja).value_or("");
      qwen_tools_ = contains(jinja, "<tool_response>");
      qwen3_think_ = contains(jinja, "last_query_index") && contains(jinja, kQwen3Think);
      RETURN_IF_ERROR(refuse_markers(jinja, "chatml", kChatmlForeign));
      if (!qwen3_think_) {
        RETURN_IF_ERROR(refuse_markers(jinja, "chatml (reasoning other than Qwen3's)",
                                       {"<think>", "strip"}));
      }
      return absl::OkStatus();
    case Family::kLlama3: {
      llama31_ = contains(jinja, "Cutting Knowledge Date");
      if (!llama31_) RETURN_IF_ERROR(refuse_markers(jinja, "llama3", {"tools", "functions"}));
      if (!llama31_ || contains(jinja, "strftime_now")) return absl::OkStatus();
      constexpr std::string_view kDate = "set date_string = \"";
      const size_t at = jinja.find(kDate);
      const size_t end = at == std::string_view::npos ? at : jinja.find('"', at + kDate.size());
      if (end == std::string_view::npos) {
        return absl::UnimplementedError(
            "chat template: Llama 3.1-style template without a date_string we can read");
      }
      llama31_date_ = std::string(jinja.substr(at + kDate.size(), end - at - kDate.size()));
      return absl::OkStatus();
    }
    case Family::kGemma:
      gemma_refuses_system_ = contains(jinja, "System role not supported");
      return absl::OkStatus();
    case Family::kPhi3:
      RETURN_IF_ERROR(refuse_markers(jinja, "phi3", {"tools"}));
      phi35_ = contains(jinja, "<|system|>\n") || contains(jinja, "<|system|>\\n");
      if (!phi35_ && contains(jinja, "<|system|>")) {
        return absl::UnimplementedError(
            "chat template: a Phi template with '<|system|>' not followed by a newline "
            "(Phi-4-mini style) is not supported");
      }
      return absl::OkStatus();
    default:
      return absl::OkStatus();
  }
}

absl::StatusOr<ChatTemplate> ChatTemplate::from_gguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(const std::string text, file.get_string("tokenizer.chat_template"));
  std::string eos = "</s>";
  if (file.find("tokenizer.ggml.eos_token_id") != nullptr &&
      file.find("tokenizer.ggml.tokens") != nullptr) {
    ASSIGN_OR_RETURN(const int64_t id, file.get_int("tokenizer.ggml.eos_token_id"));
    ASSIGN_OR_RETURN(const std::vector<std::string> tokens,
                     file.get_string_array("tokenizer.ggml.tokens"));
    if (id >= 0 && id < static_cast<int64_t>(tokens.size())) eos = tokens[id];
  }
  return from_template_text(text, eos);
}

std::string_view ChatTemplate::family_name() const {
  switch (family_) {
    case Family::kChatml: return "chatml";
    case Family::kZephyr: return "zephyr";
    case Family::kLlama3: return "llama3";
    case Family::kGemma: return "gemma";
    case Family::kPhi3: return "phi3";
    case Family::kJinja: return "jinja";
    case Family::kLlama2:
      if (llama2_strip_) return "llama2-sys-strip";
      if (llama2_bos_in_history_) return "llama2-sys-bos";
      return llama2_system_block_ ? "llama2-sys" : "llama2";
  }
  return "unknown";
}

absl::StatusOr<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                                 bool add_generation_prompt,
                                                 const ChatRenderOptions& options) const {
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
      return render_chatml(messages, add_generation_prompt, options);
    case Family::kLlama2:
      return render_llama2(messages);
    case Family::kZephyr:
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&out, "<|", m.role, "|>\n", m.content, "<|endoftext|>\n");
      }
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
    case Family::kLlama3:
      return render_llama3(messages, add_generation_prompt, options);
    case Family::kGemma:
      return render_gemma(messages, add_generation_prompt);
    case Family::kPhi3:
      return render_phi3(messages, add_generation_prompt);
    case Family::kJinja:
      return render_jinja(messages, add_generation_prompt, options);
  }
  return absl::InternalError("chat template: unknown family");
}

}  // namespace flashserve::model
