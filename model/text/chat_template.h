#pragma once
// Chat templates: messages -> prompt text, for the template families our models use.
//
// We do not run Jinja. As llama.cpp (llm_chat_detect_template in src/llama-chat.cpp) does, the
// family is recognised from substrings of the model's tokenizer.chat_template, or given by
// name, and rendered by hand-written code that reproduces the template's output:
//
//   family      recognised by (checked in llama.cpp's order)          rendering
//   "chatml"    "<|im_start|>"                                        <|im_start|>{role}\n{content}<|im_end|>\n
//               ... + SmolLM2-style default system prompt: when the template inserts
//               '<|im_start|>system\n{text}<|im_end|>\n' if messages[0] is not a system
//               message, we insert the same {text}.
//   "llama2"    "[INST]" (variants: "<<SYS>>" system block, "bos_token + '[INST]" BOS inside
//               history, "content.strip()" stripped content)   [INST] {user} [/INST]{assistant}</s>
//   "zephyr"    "<|user|>" and "<|endoftext|>"                         <|{role}|>\n{content}<|endoftext|>\n
//   "llama3"    "<|start_header_id|>" and "<|end_header_id|>"          <|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>
//
// add_generation_prompt appends the assistant header (chatml "<|im_start|>assistant\n",
// zephyr "<|assistant|>\n", llama3 "<|start_header_id|>assistant<|end_header_id|>\n\n";
// llama2 has none). BOS is never written into the text: templates that start with
// bos_token (Llama-2, Llama-3) rely on the tokenizer adding BOS (tokenizer.ggml.add_bos_token),
// as llama.cpp does.
//
// Errors (no silent ChatML fallback, so a wrong prompt format never goes unnoticed):
//   - a template llama.cpp recognises as a family we do not render (Phi-3/4, Mistral v1/v3/v7,
//     GLM, Falcon-3, SmolVLM) -> Unimplemented naming the family;
//   - any other template -> InvalidArgument ("unrecognised chat template ...");
//   - from_gguf on a file without tokenizer.chat_template -> NotFound.
// Callers that want a default can call from_template_text("chatml") themselves.
//
// Thread-safety: immutable; render() may be called concurrently.
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace flashserve::model {

class GgufFile;

struct ChatMessage {
  std::string role;     // "system", "user", "assistant" (chatml/zephyr/llama3 accept any)
  std::string content;
};

class ChatTemplate {
 public:
  enum class Family { kChatml, kLlama2, kZephyr, kLlama3 };

  // `jinja` is either a template text or a family name ("chatml", "llama2", "llama2-sys",
  // "llama2-sys-bos", "llama2-sys-strip", "zephyr", "llama3").
  static absl::StatusOr<ChatTemplate> from_template_text(std::string_view jinja);
  static absl::StatusOr<ChatTemplate> from_gguf(const GgufFile& file);

  // InvalidArgument if `messages` is empty or a message has an empty role.
  absl::StatusOr<std::string> render(std::span<const ChatMessage> messages,
                                     bool add_generation_prompt) const;

  std::string_view family_name() const;
  Family family() const { return family_; }
  // The system prompt inserted when the conversation has none ("" if the template has none).
  const std::string& default_system_prompt() const { return default_system_; }

 private:
  explicit ChatTemplate(Family family) : family_(family) {}
  std::string render_chatml(std::span<const ChatMessage> messages, bool add_gen) const;
  std::string render_llama2(std::span<const ChatMessage> messages) const;

  Family family_;
  // llama2 variants
  bool llama2_system_block_ = false;
  bool llama2_bos_in_history_ = false;
  bool llama2_strip_ = false;
  std::string default_system_;  // chatml
};

}  // namespace flashserve::model
