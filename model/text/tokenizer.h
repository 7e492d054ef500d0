#pragma once
// Tokenizers: text <-> token ids for the two vocabulary kinds GGUF models use.
//
//   tokenizer.ggml.model = "gpt2"  -> byte-level BPE (SmolLM2, Llama-3, Qwen2, GPT-2):
//       special tokens split out first, then a regex pre-tokenizer chosen by
//       tokenizer.ggml.pre, then merges by rank over the byte<->unicode mapped bytes.
//   tokenizer.ggml.model = "llama" -> SentencePiece-style BPE by score (TinyLlama, Llama-2,
//       Mistral, Phi-3, Gemma 3): spaces written as U+2581 '▁', optional leading space
//       (tokenizer.ggml.add_space_prefix; Gemma has none), byte fallback <0xXX>.
//       tokenizer.ggml.pre must be absent or "default" (what converters write).
//   tokenizer.ggml.model = "gemma4" -> SentencePiece-style BPE by merge rank (Gemma 4): '▁'
//       for spaces, raw UTF-8 merges, byte fallback <0xXX>, BOS always added.
// Checked against llama.cpp's own test pairs for the vocabularies of Llama 3 (llama-bpe),
// Llama 2 (llama-spm), Qwen2/Qwen3 (qwen2), Qwen3.5, Phi-3, Gemma 4, GPT-2, StarCoder, Refact
// and MPT (tests/unit/tokenizer/llamacpp_vocab_test.cc).
//
// Behaviour follows llama.cpp's tokenizer (src/llama-vocab.cpp) so that ids match the
// reference implementation; tests compare against goldens produced by llama.cpp itself
// (tests/data/README.md). Where we deliberately differ it is written next to the code.
//
// Thread-safety: a Tokenizer is immutable after construction; all methods are const and may
// be called concurrently from any thread.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace flashserve::model {

class GgufFile;

// Values of tokenizer.ggml.token_type (same numbering as llama.cpp / gguf-py).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <|im_start|>, <s>, </s>: only parsed from text when parse_special
  kUserDefined = 4,  // always matched whole in the text, before pre-tokenization
  kUnused = 5,
  kByte = 6,         // SentencePiece byte fallback "<0xAB>"
};

// Everything a tokenizer is built from: the tokenizer.ggml.* metadata as plain data, so
// tests can build small synthetic vocabularies without a GGUF file.
struct TokenizerVocab {
  std::string model;                    // "gpt2" or "llama"
  std::string pre;                      // pre-tokenizer name (BPE only), e.g. "smollm"
  std::vector<std::string> tokens;      // token text, indexed by id (BPE: byte-mapped)
  std::vector<float> scores;            // SPM merge scores; empty -> all 0
  std::vector<TokenType> token_types;   // empty -> all kNormal
  std::vector<std::string> merges;      // BPE merges "left right", rank = index
  int32_t bos_id = -1;                  // -1: none
  int32_t eos_id = -1;
  int32_t eot_id = -1;                  // end of turn (if the model names one)
  int32_t unk_id = -1;
  std::optional<bool> add_bos;          // unset -> per-kind default (SPM true, llama3 true,
  std::optional<bool> add_eos;          //          other BPE false); add_eos default false
  std::optional<bool> add_space_prefix; // SPM only; unset -> true
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text -> ids. add_special: add BOS (and EOS) as the model asks (tokenizer.ggml.add_bos_token
  // / add_eos_token); false overrides that. parse_special: control tokens written in the text
  // (e.g. "<|im_start|>") become their ids; otherwise they are tokenized as plain text.
  // User-defined tokens are always matched whole. Each byte that does not begin a
  // well-formed UTF-8 sequence is tokenized as U+FFFD, as llama.cpp does, except that we also
  // count overlong forms and surrogates as ill-formed (llama.cpp decodes them leniently).
  // Bytes the vocabulary has no token for are dropped (as llama.cpp does).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;
  // Ids -> text, taking `ids` as a whole text from its start: the concatenation of
  // token_bytes(); with skip_special, control/unknown tokens contribute nothing. SPM: the
  // leading space added by add_space_prefix is removed from the first contributing token
  // (llama.cpp keeps it when the ids start with BOS; we remove it there too, so that
  // decode(encode(s, true, false), true) == s). Out-of-range ids contribute nothing. The
  // result may be invalid UTF-8 if `ids` ends inside a character. To stream generated
  // tokens (a continuation, whose first space matters) use IncrementalDetokenizer.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  // Raw bytes this token stands for ("" for an out-of-range id). Control tokens: their text.
  virtual std::string token_bytes(int32_t id) const = 0;
  // The token's text as stored in the vocabulary (byte-mapped for BPE, '▁' for SPM).
  virtual std::string_view token_text(int32_t id) const = 0;
  virtual int vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 if the model has none
  virtual int32_t eos_id() const = 0;
  // End of generation: eos, eot, and tokens named <|im_end|>, <|eot_id|>, <|endoftext|>,
  // <|end|>, <end_of_turn>, <|eom_id|>, <|end_of_text|>, <EOT> (llama.cpp's list).
  virtual bool is_end_of_generation(int32_t id) const = 0;
  virtual bool is_control(int32_t id) const = 0;  // kControl or kUnknown
  // Whether encode(..., add_special=true, ...) prepends BOS.
  virtual bool adds_bos() const = 0;
};

// Builds the tokenizer the vocabulary describes. InvalidArgument (naming the key/value) for
// an unknown model or pre-tokenizer, mismatched array lengths, duplicate token texts or
// special ids out of range.
absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer_from_vocab(TokenizerVocab vocab);

// Reads the tokenizer.ggml.* keys of a GGUF file into a TokenizerVocab.
absl::StatusOr<TokenizerVocab> tokenizer_vocab_from_gguf(const GgufFile& file);

// tokenizer_vocab_from_gguf + tokenizer_from_vocab.
absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer_from_gguf(const GgufFile& file);

}  // namespace flashserve::model
