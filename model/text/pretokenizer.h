#pragma once
// Regex pre-tokenizers of byte-level BPE vocabularies, selected by tokenizer.ggml.pre.
//
// A pre-tokenizer is a list of regexes applied in turn (as llama.cpp's unicode_regex_split):
// the first splits the whole text into pieces; each later regex splits every piece further.
// Within a piece, both the matches and the unmatched stretches between them become pieces,
// so no byte is ever dropped. Unicode classes (\p{L}, \p{N}, \s) come from PCRE2 in UTF +
// UCP mode, not from hand-written tables.
//
// Supported names and their regexes (from llama.cpp src/llama-vocab.cpp):
//   "gpt-2", "gpt2", "phi-2", "mpt", "olmo"      -> GPT-2
//   "smollm", "starcoder", "refact", "codeshell" -> \p{N} (every digit alone), then GPT-2
//   "llama3", "llama-v3", "llama-bpe"            -> Llama-3 (digits in runs of up to 3)
//   "qwen2", "deepseek-r1-qwen"                  -> Qwen2 (single digits, Llama-3 otherwise)
//   "qwen35"                                     -> Qwen3.5 (Qwen2 with \p{M} in letter runs)
//   "gemma4"                                     -> runs of newlines split off, nothing else;
//                                                   SentencePiece-style (spm_style())
// Anything else is rejected with InvalidArgument naming the value.
//
// Input that is not valid UTF-8 is first made valid the way llama.cpp does: each byte that
// does not start a well-formed sequence becomes U+FFFD (sanitize_utf8() in
// model/text/utf8.h).
//
// Thread-safety: immutable after create(); split() may be called concurrently.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace flashserve::model {

class CompiledRegex;

class Pretokenizer {
 public:
  static absl::StatusOr<Pretokenizer> create(std::string_view pre_name);

  // Splits `text` (valid UTF-8; see sanitize_utf8) into pieces whose concatenation is `text`.
  // The views point into `text`.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::string& name() const { return name_; }
  // Llama-3 style: a piece that is a whole vocabulary token is emitted without merging.
  bool ignore_merges() const { return ignore_merges_; }
  // BOS is added by default (when tokenizer.ggml.add_bos_token is absent).
  bool default_add_bos() const { return default_add_bos_; }
  // SentencePiece-style BPE (Gemma 4): spaces are written as U+2581 before splitting, token
  // texts and merges are raw UTF-8 (no GPT-2 byte mapping), merging starts from characters,
  // a run of newlines that is a token is taken whole, and bytes without a token fall back to
  // the byte tokens <0xXX>.
  bool spm_style() const { return spm_style_; }

 private:
  Pretokenizer() = default;

  std::string name_;
  std::vector<std::shared_ptr<const CompiledRegex>> regexes_;
  bool ignore_merges_ = false;
  bool default_add_bos_ = false;
  bool spm_style_ = false;
};

}  // namespace flashserve::model
