// Byte-level BPE on small synthetic vocabularies: merge order, special tokens, errors.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/text/bpe_tokenizer.h"
#include "model/text/tokenizer.h"
#include "tests/unit/tokenizer/synthetic_vocab.h"

namespace flashserve::model {
namespace {

using testing::byte_level_vocab;

std::unique_ptr<Tokenizer> make(TokenizerVocab v) {
  auto t = tokenizer_from_vocab(std::move(v));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

TEST(ByteMapping, IsGpt2sBytesToUnicode) {
  EXPECT_EQ(byte_to_unicode('a'), "a");
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");   // 'Ġ' U+0120
  EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // 'Ċ' U+010A
  EXPECT_EQ(byte_to_unicode(0), "\xC4\x80");     // 'Ā' U+0100
  EXPECT_EQ(byte_to_unicode(0xAD), "\xC5\x83");  // soft hyphen is not printable: U+0143
  EXPECT_EQ(byte_to_unicode(0xFF), "\xC3\xBF");  // 'ÿ' maps to itself
  std::string bytes;
  ASSERT_TRUE(unicode_to_bytes("\xC4\xA0hi", bytes));
  EXPECT_EQ(bytes, " hi");
  EXPECT_FALSE(unicode_to_bytes("\xE2\x96\x81", bytes));  // '▁' is not a mapped byte
}

TEST(BpeTokenizer, MergesByLowestRankThenLeftmost) {
  // ranks: 0 "h e", 1 "l l", 2 "he ll", 3 "hell o"  -> ids 256.. in that order
  auto tok = make(byte_level_vocab({"h e", "l l", "he ll", "hell o"}));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("hello", false, false), (std::vector<int32_t>{259}));
  EXPECT_EQ(tok->encode("hellx", false, false), (std::vector<int32_t>{258, 'x'}));
  EXPECT_EQ(tok->encode("lll", false, false), (std::vector<int32_t>{257, 'l'}));
  // " hello": the space is its own byte since there is no "Ġ h" merge.
  EXPECT_EQ(tok->encode(" hello", false, false), (std::vector<int32_t>{' ', 259}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{' ', 259}, false), " hello");
}

TEST(BpeTokenizer, LowerRankWinsOverLeftPosition) {
  // "abc": "b c" (rank 0) beats "a b" (rank 1), leaving a + bc; "a bc" is not a merge.
  auto tok = make(byte_level_vocab({"b c", "a b"}));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("abc", false, false), (std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(tok->encode("abd", false, false), (std::vector<int32_t>{257, 'd'}));
}

TEST(BpeTokenizer, ControlTokensOnlyWithParseSpecial) {
  auto tok = make(byte_level_vocab({"a b"}, {"<|x|>", "<|xy|>"}));
  ASSERT_NE(tok, nullptr);
  const int32_t x = 257, xy = 258;
  EXPECT_EQ(tok->encode("ab<|x|>ab", false, true), (std::vector<int32_t>{256, x, 256}));
  // The longest special token is matched first.
  EXPECT_EQ(tok->encode("<|xy|><|x|>", false, true), (std::vector<int32_t>{xy, x}));
  EXPECT_EQ(tok->encode("<|x|>", false, false).size(), 5u);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{256, x, 256}, /*skip_special=*/true), "abab");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{256, x, 256}, /*skip_special=*/false), "ab<|x|>ab");
  EXPECT_TRUE(tok->is_control(x));
  EXPECT_FALSE(tok->is_control(256));
}

TEST(BpeTokenizer, UserDefinedTokensAreMatchedEvenWithoutParseSpecial) {
  TokenizerVocab v = byte_level_vocab({}, {"<tool>"});
  v.token_types.back() = TokenType::kUserDefined;
  auto tok = make(std::move(v));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("a<tool>", false, false), (std::vector<int32_t>{'a', 256}));
}

TEST(BpeTokenizer, BosEosFollowTheVocabulary) {
  TokenizerVocab v = byte_level_vocab({}, {"<s>", "</s>"});
  v.bos_id = 256;
  v.eos_id = 257;
  v.add_bos = true;
  v.add_eos = true;
  auto tok = make(std::move(v));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("a", true, false), (std::vector<int32_t>{256, 'a', 257}));
  EXPECT_EQ(tok->encode("a", false, false), (std::vector<int32_t>{'a'}));
  EXPECT_EQ(tok->encode("", true, false), (std::vector<int32_t>{256, 257}));
  EXPECT_TRUE(tok->is_end_of_generation(257));
  EXPECT_FALSE(tok->is_end_of_generation(256));
}

TEST(BpeTokenizer, Llama3PreAddsBosByDefault) {
  TokenizerVocab v = byte_level_vocab({}, {"<|begin_of_text|>", "<|eot_id|>"});
  v.pre = "llama-bpe";
  v.bos_id = 256;
  auto tok = make(std::move(v));
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(tok->adds_bos());
  EXPECT_EQ(tok->encode("a", true, false), (std::vector<int32_t>{256, 'a'}));
  EXPECT_TRUE(tok->is_end_of_generation(257));  // <|eot_id|> by name
}

TEST(BpeTokenizer, InvalidUtf8IsTokenizedAsReplacementCharacters) {
  auto tok = make(byte_level_vocab({}));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->encode("a\xFF", false, false),
            (std::vector<int32_t>{'a', 0xEF, 0xBF, 0xBD}));
}

TEST(TokenizerErrors, NameTheProblem) {
  TokenizerVocab v = byte_level_vocab({});
  v.pre = "nonexistent";
  auto t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("nonexistent"), std::string::npos);

  v = byte_level_vocab({});
  v.model = "bert";
  t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("'bert'"), std::string::npos);

  v = byte_level_vocab({});
  v.tokens[5] = v.tokens[4];
  t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("duplicates token 4"), std::string::npos);

  v = byte_level_vocab({});
  v.merges = {"nospace"};
  t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("nospace"), std::string::npos);

  v = byte_level_vocab({});
  v.eos_id = 999;
  t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("eos_token_id 999"), std::string::npos);

  v = byte_level_vocab({});
  v.scores = {1.f};
  t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("1 scores"), std::string::npos);

  v = byte_level_vocab({});
  v.add_bos = true;  // but no bos id
  t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("BOS"), std::string::npos);

  TokenizerVocab empty;
  empty.model = "gpt2";
  empty.pre = "gpt-2";
  t = tokenizer_from_vocab(empty);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("empty"), std::string::npos);
}

TEST(TokenizerErrors, PreTokenizerOfEveryModelKindIsChecked) {
  // SentencePiece: llama.cpp ignores tokenizer.ggml.pre; we accept only what converters write.
  TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "a"};
  v.pre = "default";
  EXPECT_TRUE(tokenizer_from_vocab(v).ok());
  v.pre = "";
  EXPECT_TRUE(tokenizer_from_vocab(v).ok());
  v.pre = "qwen2";
  auto t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("'qwen2'"), std::string::npos) << t.status();

  v = byte_level_vocab({});
  v.model = "gemma4";
  v.pre = "llama-bpe";
  t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("'llama-bpe'"), std::string::npos) << t.status();

  v = byte_level_vocab({});
  v.pre = "qwen35";
  EXPECT_TRUE(tokenizer_from_vocab(v).ok());
  v.pre = "qwen3";  // not a llama.cpp name: Qwen3 files use "qwen2"
  t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("'qwen3'"), std::string::npos) << t.status();
}

TEST(TokenizerDecode, SkipsOutOfRangeIds) {
  auto tok = make(byte_level_vocab({}));
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{'a', -1, 100000, 'b'}, false), "ab");
  EXPECT_EQ(tok->token_bytes(-5), "");
}

}  // namespace
}  // namespace flashserve::model
