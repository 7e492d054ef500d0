#include "model/text/tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/bpe_tokenizer.h"
#include "model/gguf/gguf.h"
#include "model/text/spm_tokenizer.h"
#include "model/text/tokenizer_base.h"
#include "model/text/utf8.h"

namespace flashserve::model {
namespace {

// Token texts that end generation besides eos/eot (the list llama.cpp uses for its EOG set).
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",    "<|im_end|>", "<|end|>",         "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>",    "<EOT>",      "<|end_of_text|>",
};

absl::Status check_id(std::string_view name, int32_t id, size_t num_tokens) {
  if (id < -1 || id >= static_cast<int64_t>(num_tokens)) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", to_absl(name), " ", id,
                                                   " is outside the vocabulary of ",
                                                   num_tokens, " tokens"));
  }
  return absl::OkStatus();
}

}  // namespace

int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    int digit = (c >= '0' && c <= '9') ? c - '0'
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                         : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}


absl::Status TokenizerBase::init_base(TokenizerVocab vocab, bool default_add_bos) {
  const size_t num_tokens = vocab.tokens.size();
  if (num_tokens == 0) return absl::InvalidArgumentError("tokenizer: the vocabulary is empty");
  if (vocab.scores.empty()) vocab.scores.assign(num_tokens, 0.f);
  if (vocab.token_types.empty()) vocab.token_types.assign(num_tokens, TokenType::kNormal);
  if (vocab.scores.size() != num_tokens || vocab.token_types.size() != num_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer: ", num_tokens, " tokens but ", vocab.scores.size(), " scores and ",
        vocab.token_types.size(), " token types"));
  }
  for (auto [name, id] : {std::pair<std::string_view, int32_t>{"bos_token_id", vocab.bos_id},
                          {"eos_token_id", vocab.eos_id},
                          {"eot_token_id", vocab.eot_id},
                          {"unknown_token_id", vocab.unk_id}}) {
    RETURN_IF_ERROR(check_id(name, id, num_tokens));
  }
  text_to_id_.reserve(num_tokens);
  for (size_t i = 0; i < num_tokens; ++i) {
    auto [it, inserted] = text_to_id_.emplace(vocab.tokens[i], static_cast<int32_t>(i));
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: token ", i, " '",
                                                     vocab.tokens[i], "' duplicates token ",
                                                     it->second));
    }
  }
  for (std::string_view text : kEndOfGenerationTexts) {
    auto it = text_to_id_.find(to_absl(text));
    if (it == text_to_id_.end()) continue;
    eog_ids_.insert(it->second);
    // As llama.cpp: a token that ends generation is a control token whatever the file says.
    vocab.token_types[it->second] = TokenType::kControl;
  }
  for (int32_t id : {vocab.eos_id, vocab.eot_id}) {
    if (id >= 0) eog_ids_.insert(id);
  }
  for (size_t i = 0; i < num_tokens; ++i) {
    TokenType t = vocab.token_types[i];
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !vocab.tokens[i].empty()) {
      special_ids_.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(special_ids_.begin(), special_ids_.end(), [&](int32_t a, int32_t b) {
    return vocab.tokens[a].size() > vocab.tokens[b].size();
  });
  // Without an explicit add_bos_token, a vocabulary without a BOS id simply adds none.
  add_bos_ = vocab.add_bos.value_or(default_add_bos && vocab.bos_id >= 0);
  add_eos_ = vocab.add_eos.value_or(false);
  if (add_bos_ && vocab.bos_id < 0) {
    return absl::InvalidArgumentError("tokenizer: add_bos_token is set but there is no BOS id");
  }
  if (add_eos_ && vocab.eos_id < 0) {
    return absl::InvalidArgumentError("tokenizer: add_eos_token is set but there is no EOS id");
  }
  vocab_ = std::move(vocab);
  return absl::OkStatus();
}

int32_t TokenizerBase::find_token(std::string_view text) const {
  auto it = text_to_id_.find(to_absl(text));
  return it == text_to_id_.end() ? -1 : it->second;
}

std::string_view TokenizerBase::token_text(int32_t id) const {
  return valid_id(id) ? std::string_view(vocab_.tokens[id]) : std::string_view();
}

bool TokenizerBase::is_control(int32_t id) const {
  if (!valid_id(id)) return false;
  TokenType t = type_of(id);
  return t == TokenType::kControl || t == TokenType::kUnknown;
}

std::vector<TextFragment> TokenizerBase::split_special(std::string_view text,
                                                       bool parse_special) const {
  std::vector<TextFragment> fragments;
  if (!text.empty()) fragments.push_back({-1, text});
  for (int32_t id : special_ids_) {
    TokenType t = type_of(id);
    if (!parse_special && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    const std::string& needle = vocab_.tokens[id];
    std::vector<TextFragment> next;
    next.reserve(fragments.size());
    for (const TextFragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      std::string_view rest = f.text;
      for (size_t pos; (pos = rest.find(needle)) != std::string_view::npos;) {
        if (pos > 0) next.push_back({-1, rest.substr(0, pos)});
        next.push_back({id, {}});
        rest.remove_prefix(pos + needle.size());
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    fragments = std::move(next);
  }
  return fragments;
}

std::vector<int32_t> TokenizerBase::encode(std::string_view text, bool add_special,
                                           bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && add_bos_) out.push_back(vocab_.bos_id);
  bool after_special = true;
  for (const TextFragment& f : split_special(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_fragment(f.text, after_special, out);
      after_special = false;
    }
  }
  if (add_special && add_eos_) out.push_back(vocab_.eos_id);
  return out;
}

std::string TokenizerBase::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool first = true;
  for (int32_t id : ids) {
    if (!valid_id(id)) continue;
    if (skip_special && is_control(id)) continue;
    out += first ? first_token_bytes(id) : token_bytes(id);
    first = false;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer_from_vocab(TokenizerVocab vocab) {
  if (vocab.model == "gpt2") return BpeTokenizer::create(std::move(vocab));
  if (vocab.model == "llama") {
    // llama.cpp ignores tokenizer.ggml.pre for SentencePiece; converters write "default".
    // Anything else means a pre-tokenizer we would silently not apply.
    if (!vocab.pre.empty() && vocab.pre != "default") {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer: pre-tokenizer tokenizer.ggml.pre = '", vocab.pre,
          "' is not supported for a SentencePiece ('llama') vocabulary (supported: 'default')"));
    }
    return SpmTokenizer::create(std::move(vocab));
  }
  if (vocab.model == "gemma4") {
    // SentencePiece-style BPE; llama.cpp uses pre-tokenizer "gemma4" whatever the file says.
    if (!vocab.pre.empty() && vocab.pre != "gemma4") {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer: pre-tokenizer tokenizer.ggml.pre = '", vocab.pre,
          "' is not supported for a 'gemma4' vocabulary (supported: 'gemma4')"));
    }
    vocab.pre = "gemma4";
    return BpeTokenizer::create(std::move(vocab));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer: tokenizer.ggml.model '", vocab.model,
                   "' is not supported (supported: 'gpt2' byte-level BPE, 'llama' "
                   "SentencePiece, 'gemma4' SentencePiece-style BPE)"));
}

namespace {

absl::StatusOr<int32_t> optional_id(const GgufFile& file, std::string_view key) {
  if (file.find(key) == nullptr) return -1;
  ASSIGN_OR_RETURN(const int64_t v, file.get_int(key));
  if (v < 0 || v > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", to_absl(key), " = ", v,
                                                   " is not a valid token id"));
  }
  return static_cast<int32_t>(v);
}

absl::StatusOr<std::optional<bool>> optional_bool(const GgufFile& file, std::string_view key) {
  if (file.find(key) == nullptr) return std::optional<bool>();
  ASSIGN_OR_RETURN(const bool v, file.get_bool(key));
  return std::optional<bool>(v);
}

}  // namespace

absl::StatusOr<TokenizerVocab> tokenizer_vocab_from_gguf(const GgufFile& file) {
  TokenizerVocab v;
  ASSIGN_OR_RETURN(v.model, file.get_string("tokenizer.ggml.model"));
  if (file.find("tokenizer.ggml.pre") != nullptr) {
    ASSIGN_OR_RETURN(v.pre, file.get_string("tokenizer.ggml.pre"));
  }
  ASSIGN_OR_RETURN(v.tokens, file.get_string_array("tokenizer.ggml.tokens"));
  if (file.find("tokenizer.ggml.scores") != nullptr) {
    ASSIGN_OR_RETURN(v.scores, file.get_float_array("tokenizer.ggml.scores"));
  }
  if (file.find("tokenizer.ggml.token_type") != nullptr) {
    ASSIGN_OR_RETURN(const std::vector<int64_t> types,
                     file.get_int_array("tokenizer.ggml.token_type"));
    v.token_types.reserve(types.size());
    for (int64_t t : types) {
      if (t < 0 || t > static_cast<int64_t>(TokenType::kByte)) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokenizer: tokenizer.ggml.token_type has unknown type ", t));
      }
      v.token_types.push_back(static_cast<TokenType>(t));
    }
  }
  if (file.find("tokenizer.ggml.merges") != nullptr) {
    ASSIGN_OR_RETURN(v.merges, file.get_string_array("tokenizer.ggml.merges"));
  }
  struct IdKey { int32_t* field; std::string_view key; };
  for (IdKey k : {IdKey{&v.bos_id, "tokenizer.ggml.bos_token_id"},
                  IdKey{&v.eos_id, "tokenizer.ggml.eos_token_id"},
                  IdKey{&v.eot_id, "tokenizer.ggml.eot_token_id"},
                  IdKey{&v.unk_id, "tokenizer.ggml.unknown_token_id"}}) {
    ASSIGN_OR_RETURN(*k.field, optional_id(file, k.key));
  }
  struct BoolKey { std::optional<bool>* field; std::string_view key; };
  for (BoolKey k : {BoolKey{&v.add_bos, "tokenizer.ggml.add_bos_token"},
                    BoolKey{&v.add_eos, "tokenizer.ggml.add_eos_token"},
                    BoolKey{&v.add_space_prefix, "tokenizer.ggml.add_space_prefix"}}) {
    ASSIGN_OR_RETURN(*k.field, optional_bool(file, k.key));
  }
  return v;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer_from_gguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(TokenizerVocab vocab, tokenizer_vocab_from_gguf(file));
  return tokenizer_from_vocab(std::move(vocab));
}

}  // namespace flashserve::model
