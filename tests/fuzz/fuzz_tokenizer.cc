// libFuzzer target: the tokenizers on arbitrary text and ids — the real SmolLM2 BPE tokenizer
// (from the model file: $FLASHSERVE_FUZZ_MODEL or models/SmolLM2-135M-Instruct.Q4_1.gguf) and a
// small SentencePiece vocabulary with byte fallback built here. Checks, besides no crash:
// every id is in the vocabulary, and decode(encode(text)) == text for valid UTF-8 text that the
// vocabulary covers (SPM with byte fallback covers every byte), where SPM reads a U+2581 in
// the text as the space it stands for (tests/unit/tokenizer/spm_test.cc
// ASpaceMarkerInTheTextIsASpace).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/gguf/gguf.h"
#include "model/text/tokenizer.h"
#include "model/text/utf8.h"

namespace {

using flashserve::model::Tokenizer;
using flashserve::model::TokenizerVocab;
using flashserve::model::TokenType;

std::unique_ptr<Tokenizer> g_bpe;
std::unique_ptr<Tokenizer> g_spm;

std::unique_ptr<Tokenizer> make_spm() {
  TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.tokens.push_back(name);
    v.token_types.push_back(TokenType::kByte);
  }
  const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's space
  for (const std::string& piece : {space, space + "the", space + "a", std::string("he"),
                                   std::string("llo"), space + "hello", std::string("wor"),
                                   std::string("ld"), space + "world", std::string("in"),
                                   std::string("ing")}) {
    v.tokens.push_back(piece);
    v.token_types.push_back(TokenType::kNormal);
  }
  v.scores.assign(v.tokens.size(), 0.f);
  for (size_t i = 3 + 256; i < v.scores.size(); ++i) v.scores[i] = -static_cast<float>(i);
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  auto tokenizer = flashserve::model::tokenizer_from_vocab(std::move(v));
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "fuzz_tokenizer: SPM vocab: %s\n", tokenizer.status().ToString().c_str());
    std::abort();
  }
  return std::move(*tokenizer);
}

std::unique_ptr<Tokenizer> load_bpe() {
  const char* env = std::getenv("FLASHSERVE_FUZZ_MODEL");
  const std::string path = env != nullptr ? env : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  auto file = flashserve::model::GgufFile::open(path);
  if (!file.ok()) {
    std::fprintf(stderr, "fuzz_tokenizer: cannot open %s (%s); set FLASHSERVE_FUZZ_MODEL\n",
                 path.c_str(), file.status().ToString().c_str());
    std::abort();
  }
  auto tokenizer = flashserve::model::tokenizer_from_gguf(**file);
  if (!tokenizer.ok()) std::abort();
  return std::move(*tokenizer);
}

// `text` with every U+2581 (SentencePiece's space marker) written as a space.
std::string marker_as_space(std::string_view text) {
  static constexpr std::string_view kMarker = "\xe2\x96\x81";
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kMarker.size()) == kMarker) {
      out += ' ';
      i += kMarker.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

void check(const Tokenizer& tokenizer, std::string_view text, bool round_trip) {
  const bool parse_special = !text.empty() && (text[0] & 1);
  const std::vector<int32_t> ids = tokenizer.encode(text, /*add_special=*/false, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
  }
  const std::string decoded = tokenizer.decode(ids, /*skip_special=*/false);
  if (round_trip && !parse_special && flashserve::model::sanitize_utf8(text) == text &&
      decoded != marker_as_space(text)) {
    std::fprintf(stderr, "round trip differs: %zu bytes in, %zu out\n", text.size(),
                 decoded.size());
    std::abort();
  }
  (void)tokenizer.encode(text, /*add_special=*/true, /*parse_special=*/true);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_bpe = load_bpe();
  g_spm = make_spm();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check(*g_spm, text, /*round_trip=*/true);
  check(*g_bpe, text, /*round_trip=*/false);
  // The same bytes as token ids (out-of-range ids must be ignored, not crash).
  std::vector<int32_t> ids(size / 4);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(&ids[i], data + 4 * i, 4);
  }
  (void)g_bpe->decode(ids, true);
  (void)g_spm->decode(ids, false);
  for (int32_t id : ids) (void)g_bpe->token_bytes(id);
  return 0;
}
