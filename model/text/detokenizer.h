#pragma once
// Incremental detokenization for streaming: one IncrementalDetokenizer per sequence.
//
// push(id) returns the text that became complete with this token; bytes of a character that
// is split across tokens (emoji and CJK in byte-level BPE, <0xAB> byte fallback in
// SentencePiece) are held back until the character is complete, so every returned string is
// valid UTF-8. A byte that can never start or continue a well-formed character is returned
// as U+FFFD at once. flush() returns what is still held (as U+FFFD per byte).
//
// Generated tokens continue a prompt, so by default every token contributes its
// token_bytes() unchanged: a SentencePiece "▁Paris" right after the prompt streams as
// " Paris". With start_of_text = true the ids are a text of their own and, like decode(),
// the first token loses the leading space that SentencePiece's add_space_prefix added.
//
// Contract: the concatenation of all push() results and flush() equals
//   start_of_text: sanitize_utf8(tokenizer.decode(ids, skip_special));
//   otherwise:     sanitize_utf8(concatenation of token_bytes(id) over the ids that are in
//                  range and not skipped) — the same for byte-level BPE.
//
// Not thread-safe (one sequence, one owner); the Tokenizer must outlive it.
#include <cstdint>
#include <string>

#include "model/text/tokenizer.h"

namespace flashserve::model {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = true,
                                  bool start_of_text = false);

  std::string push(int32_t id);  // newly completed text (may be empty)
  std::string flush();           // held bytes at the end, invalid ones as U+FFFD

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool start_of_text_;
  bool started_ = false;  // a token has contributed text (SPM's first-token rule applies once)
  std::string pending_;   // bytes of an incomplete character
};

}  // namespace flashserve::model
