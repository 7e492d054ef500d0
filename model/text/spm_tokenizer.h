#pragma once
// SentencePiece-style BPE (tokenizer.ggml.model = "llama"), as TinyLlama, Llama-2 and Mistral
// use, following llama.cpp's llm_tokenizer_spm.
//
// encode, per text fragment: if add_space_prefix and the fragment starts the input or
// follows a special token, prepend ' '; write every ' ' as U+2581 '▁'; split into UTF-8
// characters; then repeatedly merge the adjacent pair whose concatenation is a vocabulary
// token with the highest score (leftmost on ties). A final piece that is not a token is
// written as byte tokens "<0xAB>" (byte fallback), or the unknown token if the vocabulary
// has no byte token.
//
// decode: '▁' becomes ' ', byte tokens become their byte; with add_space_prefix the first
// decoded token loses one leading space (the one encode added). Spaces added after special
// tokens in the middle of the input are kept, as in llama.cpp. (Not byte-exact with
// llama_detokenize, which keeps that space when the ids start with BOS.)
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/tokenizer_base.h"

namespace flashserve::model {

class SpmTokenizer final : public TokenizerBase {
 public:
  static absl::StatusOr<std::unique_ptr<SpmTokenizer>> create(TokenizerVocab vocab);

  std::string token_bytes(int32_t id) const override;

 protected:
  void encode_fragment(std::string_view text, bool after_special,
                       std::vector<int32_t>& out) const override;
  std::string first_token_bytes(int32_t id) const override;

 private:
  SpmTokenizer() = default;
  absl::Status build_tables();
  void emit_piece(std::string_view piece, std::vector<int32_t>& out) const;

  bool add_space_prefix_ = true;
  std::vector<std::string> token_bytes_;  // by token id
  std::array<int32_t, 256> byte_token_{};  // id of "<0xAB>" (or of the 1-byte token), -1
};

}  // namespace flashserve::model
