// Arbitrary bytes never break the tokenizers: decode(encode(s)) is the sanitized input, and
// streaming detokenization equals the full decode, for random byte strings (fixed seeds).
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/text/detokenizer.h"
#include "model/gguf/gguf.h"
#include "model/text/tokenizer.h"
#include "model/text/utf8.h"
#include "tests/unit/tokenizer/synthetic_vocab.h"

namespace flashserve::model {
namespace {

// Random strings mixing ASCII, multi-byte characters, control-token text and raw bytes.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> kAtoms = {
      "a", "Z", " ", "  ", "\n", "\t", "7", "'s", "'LL", "é", "中", "😀", "\xE2\x80\x8D",
      "<|im_start|>", "<|im_end|>", "<|endoftext|>", ".", "!", "\xFF", "\xC3", "\xE4\xB8",
      "\xF0\x9F", "\x80", "\xC0\xAF", "\xED\xA0\x80", "\x00"};
  std::uniform_int_distribution<size_t> atom(0, kAtoms.size() - 1);
  std::uniform_int_distribution<int> length(0, 40);
  // Raw bytes from 0x20..0xF0: SmolLM2 has no token for the bytes 0x04 0x06 0x13 0x14 0x16
  // 0x1D 0xF1 0xF2 (nor 0xC0 0xC1 0xF5..0xFF, which never occur in valid UTF-8), so text with
  // them cannot round-trip; llama.cpp drops them the same way (corpus golden).
  std::uniform_int_distribution<int> byte(0x20, 0xF0);
  std::string s;
  for (int i = 0, n = length(rng); i < n; ++i) {
    if (rng() % 8 == 0) {
      s += static_cast<char>(byte(rng));
    } else {
      s += kAtoms[atom(rng)];
    }
  }
  return s;
}

void check_round_trips(const Tokenizer& tok, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    const std::string text = random_text(rng);
    const std::vector<int32_t> ids = tok.encode(text, false, /*parse_special=*/false);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size());
    ASSERT_EQ(tok.decode(ids, false), sanitize_utf8(text)) << ::testing::PrintToString(text);
    const std::vector<int32_t> special_ids = tok.encode(text, true, /*parse_special=*/true);
    IncrementalDetokenizer d(tok);
    std::string streamed;
    for (int32_t id : special_ids) streamed += d.push(id);
    streamed += d.flush();
    ASSERT_EQ(streamed, sanitize_utf8(tok.decode(special_ids, true)))
        << ::testing::PrintToString(text);
  }
}

TEST(TokenizerRobustness, SyntheticByteLevelVocab) {
  auto tok = tokenizer_from_vocab(
      testing::byte_level_vocab({"a a", "Ġ Z", "ä ¸", "ð Ł"}, {"<|im_start|>", "<|im_end|>"}));
  ASSERT_TRUE(tok.ok()) << tok.status();
  check_round_trips(**tok, 1);
}

TEST(TokenizerRobustness, SmolLm2) {
  constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << kModel << " is absent";
  auto file = GgufFile::open(kModel);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = tokenizer_from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  check_round_trips(**tok, 2);
}

}  // namespace
}  // namespace flashserve::model
