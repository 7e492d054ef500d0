#pragma once
// What the BPE and SentencePiece tokenizers share: the vocabulary tables, special-token
// splitting, BOS/EOS handling and end-of-generation ids. Internal to model/text/ (the public
// API is model/text/tokenizer.h).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "model/text/tokenizer.h"

namespace flashserve::model {

// A piece of the input after special-token splitting: either raw text or one token id.
struct TextFragment {
  int32_t token = -1;          // >= 0: a special token; -1: text
  std::string_view text;       // the raw text when token == -1
};

// "<0xAB>" -> 0xAB: the byte a SentencePiece byte token stands for; -1 if `text` is not of
// that form.
int parse_byte_token(std::string_view text);

class TokenizerBase : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::string_view token_text(int32_t id) const override;
  int vocab_size() const override { return static_cast<int>(vocab_.tokens.size()); }
  int32_t bos_id() const override { return vocab_.bos_id; }
  int32_t eos_id() const override { return vocab_.eos_id; }
  bool is_end_of_generation(int32_t id) const override { return eog_ids_.contains(id); }
  bool is_control(int32_t id) const override;
  bool adds_bos() const override { return add_bos_; }

  // Splits `text` at special tokens, longest token text first (as llama.cpp does): control
  // and unknown tokens only when parse_special, user-defined tokens always.
  std::vector<TextFragment> split_special(std::string_view text, bool parse_special) const;

 protected:
  // Checks the vocabulary (lengths, ids, duplicates) and builds the shared tables.
  // default_add_bos applies when vocab.add_bos is unset.
  absl::Status init_base(TokenizerVocab vocab, bool default_add_bos);

  // Appends the ids of one text fragment. after_special: the fragment starts the input or
  // follows a special token (SentencePiece adds its leading space there).
  virtual void encode_fragment(std::string_view text, bool after_special,
                               std::vector<int32_t>& out) const = 0;
  // The text a token contributes when it is the first one decoded (SPM drops a leading
  // space); by default token_bytes(id).
  virtual std::string first_token_bytes(int32_t id) const { return token_bytes(id); }

  TokenType type_of(int32_t id) const { return vocab_.token_types[id]; }
  bool valid_id(int32_t id) const { return id >= 0 && id < vocab_size(); }
  // id of the token whose vocabulary text is exactly `text`, or -1.
  int32_t find_token(std::string_view text) const;

  TokenizerVocab vocab_;  // token_types and scores always have one entry per token
  absl::flat_hash_map<std::string, int32_t> text_to_id_;  // vocabulary text -> id
  std::vector<int32_t> special_ids_;   // control/user-defined/unknown, longest text first
  absl::flat_hash_set<int32_t> eog_ids_;
  bool add_bos_ = false;
  bool add_eos_ = false;
};

}  // namespace flashserve::model
