#pragma once
// Small in-memory vocabularies for tokenizer tests.
#include <string>
#include <vector>

#include "model/text/bpe_tokenizer.h"
#include "model/text/tokenizer.h"

namespace flashserve::testing {

// Byte-level BPE: ids 0..255 are the 256 single bytes (byte-mapped), then one token per
// merge result, then the given control tokens.
inline model::TokenizerVocab byte_level_vocab(const std::vector<std::string>& merges,
                                              const std::vector<std::string>& control = {}) {
  model::TokenizerVocab v;
  v.model = "gpt2";
  v.pre = "gpt-2";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(model::byte_to_unicode(static_cast<uint8_t>(b)));
  for (const std::string& m : merges) {
    v.merges.push_back(m);
    const size_t space = m.find(' ', 1);
    v.tokens.push_back(m.substr(0, space) + m.substr(space + 1));
  }
  v.token_types.assign(v.tokens.size(), model::TokenType::kNormal);
  for (const std::string& c : control) {
    v.tokens.push_back(c);
    v.token_types.push_back(model::TokenType::kControl);
  }
  return v;
}

}  // namespace flashserve::testing
