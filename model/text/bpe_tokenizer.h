#pragma once
// Byte-level BPE (tokenizer.ggml.model = "gpt2"), as GPT-2, SmolLM2, Llama-3 and Qwen2 use.
//
// encode: special tokens are split out (TokenizerBase), the text is made valid UTF-8
// (sanitize_utf8), split by the pre-tokenizer, and each piece's bytes are merged pairwise
// by lowest merge rank (leftmost first on ties) until no ranked pair remains. Token texts
// and merges are stored in GPT-2's byte<->unicode mapping (byte 0x20 is 'Ġ', ...); this class
// converts them to raw bytes once at construction and works on bytes afterwards.
//
// A byte that the vocabulary has no token for is dropped, as llama.cpp does (SmolLM2 lacks
// the bytes 0x04 0x06 0x13 0x14 0x16 0x1D 0xF1 0xF2, so "a\x16b" encodes like "ab").
//
// Deliberate difference from llama.cpp: a merged piece that is not a vocabulary token (only
// possible with inconsistent merges) falls back to one token per raw byte; llama.cpp looks
// the bytes of the *mapped* text up instead.
//
// tokenizer.ggml.model = "gemma4" is SentencePiece-style BPE on the same machinery (see
// Pretokenizer::spm_style()): spaces become '▁', texts and merges are raw UTF-8, merging
// starts from characters, and what stays unmerged falls back to the byte tokens <0xXX>.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "model/text/pretokenizer.h"
#include "model/text/tokenizer_base.h"

namespace flashserve::model {

class BpeTokenizer final : public TokenizerBase {
 public:
  // InvalidArgument for an unknown tokenizer.ggml.pre, a merge without a space, or the
  // checks of TokenizerBase.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> create(TokenizerVocab vocab);

  std::string token_bytes(int32_t id) const override;
  const Pretokenizer& pretokenizer() const { return pretokenizer_; }

 protected:
  void encode_fragment(std::string_view text, bool after_special,
                       std::vector<int32_t>& out) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;  // symbol id of the concatenation
  };

  explicit BpeTokenizer(Pretokenizer pretokenizer) : pretokenizer_(std::move(pretokenizer)) {}
  absl::Status build_tables();
  // Symbol id of a byte string: its token id if it is a vocabulary token, otherwise an id
  // >= vocab_size() private to the merge table.
  int32_t intern(std::string bytes);
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  // Appends `symbol` if it is a token, else the byte fallback of each of its `bytes`.
  void emit_symbol(int32_t symbol, std::string_view bytes, std::vector<int32_t>& out) const;
  // SPM style: the bytes a token stands for ('▁' -> ' ', <0xAB> -> the byte).
  absl::Status spm_token_bytes(int32_t id, const std::string& text, std::string& bytes) const;

  Pretokenizer pretokenizer_;
  std::vector<std::string> token_bytes_;                       // by token id
  absl::flat_hash_map<std::string, int32_t> bytes_to_symbol_;  // raw bytes -> symbol id
  std::vector<std::string> extra_symbols_;  // bytes of symbol vocab_size() + i
  absl::flat_hash_map<uint64_t, Merge> merges_;  // (left symbol << 32 | right symbol)
  std::array<int32_t, 256> byte_symbol_{};       // symbol of each single byte (-1: SPM style)
  std::array<int32_t, 256> byte_fallback_{};     // token of a byte left unmerged, -1: dropped
};

// GPT-2's reversible byte -> unicode mapping: printable bytes map to themselves, the others
// to U+0100 + n. byte_to_unicode(b) is the UTF-8 of the mapped code point.
const std::string& byte_to_unicode(uint8_t byte);
// Inverse of byte_to_unicode over a whole string; false if `mapped` contains a character
// that is not the image of a byte.
bool unicode_to_bytes(std::string_view mapped, std::string& bytes);

}  // namespace flashserve::model
