#pragma once
// Chat templates: messages -> prompt text, for the template families our models use.
//
// We do not run Jinja. As llama.cpp (llm_chat_detect_template in src/llama-chat.cpp) does, the
// family is recognised from substrings of the model's tokenizer.chat_template, or given by
// name, and rendered by hand-written code that reproduces the template's output:
//
//   family      recognised by (checked in llama.cpp's order)          rendering
//   "chatml"    "<|im_start|>"                                        <|im_start|>{role}\n{content}<|im_end|>\n
//               ... + default system prompt (SmolLM2, Qwen2.5): when the template inserts
//               '<|im_start|>system\n{text}<|im_end|>\n' if messages[0] is not a system
//               message, we insert the same {text}.
//   "llama2"    "[INST]" (variants: "<<SYS>>" system block, "bos_token + '[INST]" BOS inside
//               history, "content.strip()" stripped content)   [INST] {user} [/INST]{assistant}</s>
//   "phi3"      "<|assistant|>" and "<|end|>": Phi-3-mini/medium (no "<|system|>"):
//               <|user|>\n{content}<|end|>\n<|assistant|>\n, then {assistant content}<|end|>\n,
//               other roles dropped. Phi-3.5 ("<|system|>" then a newline):
//               <|{role}|>\n{content}<|end|>\n for system (if non-empty), user, assistant;
//               "<|endoftext|>" (eos) at the end when no generation prompt is asked for.
//   "zephyr"    "<|user|>" and "<|endoftext|>"                         <|{role}|>\n{content}<|endoftext|>\n
//   "llama3"    "<|start_header_id|>" and "<|end_header_id|>"          <|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>
//               ... Llama 3.1/3.2/3.3 ("Cutting Knowledge Date"): the system message
//               (trimmed, or "") always comes first, in a block with the knowledge cut-off and
//               a date (the template's fixed one, or today's when it calls strftime_now);
//               "tool"/"ipython" turns go, as JSON strings, under the "ipython" header.
//   "gemma"     "<start_of_turn>"   <start_of_turn>{user|model}\n{content, trimmed}<end_of_turn>\n
//               roles must alternate user/assistant; a system message is refused where the
//               template raises on it (Gemma 2) and otherwise, as Gemma 3's template does, put
//               before the first user message followed by "\n\n".
//
// Qwen's ChatML templates (with "<tool_response>") put "tool" turns inside a user turn as
// <tool_response>\n{content}\n</tool_response>. Qwen3's ("</think>" and "last_query_index")
// keep the reasoning of assistant turns after the last user message as
// "<think>\n{reasoning}\n</think>\n\n{answer}" and drop it from earlier turns (docs/models.md);
// with enable_thinking = false the generation prompt is followed by "<think>\n\n</think>\n\n",
// which tells the model not to think.
//
// add_generation_prompt appends the assistant header (chatml "<|im_start|>assistant\n",
// zephyr and phi3 "<|assistant|>\n", llama3 "<|start_header_id|>assistant<|end_header_id|>\n\n",
// gemma "<start_of_turn>model\n"; llama2 has none). BOS is never written into the text:
// templates that start with bos_token (Llama 2/3, Gemma, Phi-3) rely on the tokenizer adding
// BOS (tokenizer.ggml.add_bos_token), as llama.cpp does.
//
// Every accepted template is checked against Python's jinja2 rendering of the real templates
// llama.cpp ships (tests/data/chat_template_jinja2.json): a template that detection accepts
// renders identically on every conversation there, or detection refuses it.
//
// A template that no family renderer reproduces is handed to our Jinja interpreter
// (model/text/jinja.h; family "jinja"), which renders the template itself. It must parse and
// render a trial conversation at load; otherwise the template is refused with both reasons.
// The interpreter is held to the same jinja2 golden (tests/unit/chat_template/jinja_test.cc).
//
// Errors (no silent ChatML fallback, so a wrong prompt format never goes unnoticed):
//   - a template llama.cpp recognises as a family we do not render (Phi-4, Mistral v1/v3/v7,
//     GLM, Falcon-3, SmolVLM), or a variant of ours whose output we do not reproduce
//     -> Unimplemented naming it;
//   - any other template -> InvalidArgument ("unrecognised chat template ...");
//   - from_gguf on a file without tokenizer.chat_template -> NotFound.
// Callers that want a default can call from_template_text("chatml") themselves.
//
// Thread-safety: immutable; render() may be called concurrently.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace flashserve::model {

class GgufFile;
namespace jinja {
class JinjaTemplate;
}

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool"
  std::string content;
};

// What some templates read besides the messages.
struct ChatRenderOptions {
  // Qwen3: false appends an empty "<think>\n\n</think>\n\n" to the generation prompt.
  std::optional<bool> enable_thinking;
  // Today's date as "%d %b %Y" ("01 Dec 2026") for templates that print it (Llama 3.2/3.3
  // call strftime_now); empty: the current UTC date.
  std::string today;
  // The time strftime_now() formats in templates run by the Jinja interpreter, in seconds
  // since the epoch (UTC); -1: now.
  int64_t now_unix_seconds = -1;
};

class ChatTemplate {
 public:
  enum class Family { kChatml, kLlama2, kZephyr, kLlama3, kGemma, kPhi3, kJinja };

  // `jinja` is either a template text or a family name ("chatml", "llama2", "llama2-sys",
  // "llama2-sys-bos", "llama2-sys-strip", "zephyr", "llama3", "gemma", "phi3").
  // eos_token is what templates run by the Jinja interpreter see as `eos_token`.
  static absl::StatusOr<ChatTemplate> from_template_text(std::string_view jinja,
                                                         std::string_view eos_token = "</s>");
  // Reads tokenizer.chat_template, and the EOS token's text for the Jinja interpreter.
  static absl::StatusOr<ChatTemplate> from_gguf(const GgufFile& file);

  // InvalidArgument if `messages` is empty, a message has an empty role, or the template
  // refuses the conversation (Gemma: roles that do not alternate; a system message, Gemma 2).
  absl::StatusOr<std::string> render(std::span<const ChatMessage> messages,
                                     bool add_generation_prompt,
                                     const ChatRenderOptions& options = {}) const;

  std::string_view family_name() const;
  Family family() const { return family_; }
  // The system prompt inserted when the conversation has none ("" if the template has none).
  const std::string& default_system_prompt() const { return default_system_; }

 private:
  explicit ChatTemplate(Family family) : family_(family) {}
  // Reads the variant flags below from the template text.
  absl::Status detect_variants(std::string_view jinja);
  std::string render_chatml(std::span<const ChatMessage> messages, bool add_gen,
                            const ChatRenderOptions& options) const;
  std::string render_llama2(std::span<const ChatMessage> messages) const;
  std::string render_llama3(std::span<const ChatMessage> messages, bool add_gen,
                            const ChatRenderOptions& options) const;
  absl::StatusOr<std::string> render_gemma(std::span<const ChatMessage> messages,
                                           bool add_gen) const;
  std::string render_phi3(std::span<const ChatMessage> messages, bool add_gen) const;
  absl::StatusOr<std::string> render_jinja(std::span<const ChatMessage> messages, bool add_gen,
                                           const ChatRenderOptions& options) const;
  // The Jinja interpreter for `jinja`, after a trial render; `family_error` is why no family
  // renderer took it.
  static absl::StatusOr<ChatTemplate> from_interpreter(std::string_view jinja,
                                                       std::string_view eos_token,
                                                       const absl::Status& family_error);

  Family family_;
  // llama2 variants
  bool llama2_system_block_ = false;
  bool llama2_bos_in_history_ = false;
  bool llama2_strip_ = false;
  // chatml
  std::string default_system_;
  bool qwen_tools_ = false;   // "tool" turns as <tool_response> inside a user turn
  bool qwen3_think_ = false;  // Qwen3's reasoning handling
  // llama3: the 3.1+ system block; its fixed date ("" when the template asks for today's)
  bool llama31_ = false;
  std::string llama31_date_;
  // gemma: a system message is an error (Gemma 2) rather than a prefix of the first turn
  bool gemma_refuses_system_ = false;
  // phi3: the Phi-3.5 layout rather than Phi-3-mini's
  bool phi35_ = false;
  // jinja
  std::shared_ptr<const jinja::JinjaTemplate> jinja_;
  std::string eos_token_;
};

}  // namespace flashserve::model
