// SentencePiece-style tokenizer on a synthetic vocabulary (byte fallback, leading space,
// scores), against llama.cpp tokenizing the same vocabulary written as a vocab-only GGUF
// (tests/data/tokenizer_spm_synthetic.json; see tests/data/README.md). The same vocabulary
// also goes through a GGUF image (tests/support/gguf_writer.h) and tokenizer_from_gguf.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/text/detokenizer.h"
#include "model/gguf/gguf.h"
#include "model/text/tokenizer.h"
#include "model/text/utf8.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/json.h"

namespace flashserve::model {
namespace {

using testing::from_hex;
using testing::Json;

constexpr char kGoldenPath[] = "tests/data/tokenizer_spm_synthetic.json";

TokenizerVocab vocab_from_golden(const Json& root) {
  const Json& v = root.at("vocab");
  TokenizerVocab vocab;
  vocab.model = "llama";
  for (const Json& t : v.at("tokens")) vocab.tokens.push_back(t.get<std::string>());
  for (const Json& s : v.at("scores")) vocab.scores.push_back(static_cast<float>(s.get<double>()));
  for (const Json& t : v.at("token_types")) {
    vocab.token_types.push_back(static_cast<TokenType>(static_cast<int>(t.get<double>())));
  }
  vocab.unk_id = static_cast<int32_t>(v.at("unk_id").get<double>());
  vocab.bos_id = static_cast<int32_t>(v.at("bos_id").get<double>());
  vocab.eos_id = static_cast<int32_t>(v.at("eos_id").get<double>());
  return vocab;
}

std::unique_ptr<GgufFile> gguf_image(const TokenizerVocab& v) {
  using namespace flashserve::testing;
  std::vector<int32_t> types;
  for (TokenType t : v.token_types) types.push_back(static_cast<int32_t>(t));
  GgufWriter w;
  w.add("general.architecture", gguf_string("llama"))
      .add("tokenizer.ggml.model", gguf_string("llama"))
      .add("tokenizer.ggml.tokens", gguf_string_array(v.tokens))
      .add("tokenizer.ggml.scores", gguf_f32_array(v.scores))
      .add("tokenizer.ggml.token_type", gguf_i32_array(types))
      .add("tokenizer.ggml.unknown_token_id", gguf_u32(v.unk_id))
      .add("tokenizer.ggml.bos_token_id", gguf_u32(v.bos_id))
      .add("tokenizer.ggml.eos_token_id", gguf_u32(v.eos_id));
  auto file = GgufFile::from_bytes(w.bytes());
  EXPECT_TRUE(file.ok()) << file.status();
  return file.ok() ? *std::move(file) : nullptr;
}

class SpmTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::read_json_file(kGoldenPath);
    vocab_ = vocab_from_golden(root_);
    auto t = tokenizer_from_vocab(vocab_);
    ASSERT_TRUE(t.ok()) << t.status();
    tok_ = *std::move(t);
  }
  int32_t id_of(const std::string& text) const {
    for (size_t i = 0; i < vocab_.tokens.size(); ++i) {
      if (vocab_.tokens[i] == text) return static_cast<int32_t>(i);
    }
    return -1;
  }
  Json root_;
  TokenizerVocab vocab_;
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(SpmTokenizer, IdsMatchLlamaCpp) {
  ASSERT_GE(root_.at("cases").size(), 60u);
  for (const Json& c : root_.at("cases")) {
    const std::string text = from_hex(c.at("hex").get<std::string>());
    std::vector<int32_t> expected;
    for (const Json& id : c.at("ids")) expected.push_back(static_cast<int32_t>(id.get<double>()));
    EXPECT_EQ(tok_->encode(text, c.at("add_special").get<bool>(), c.at("parse_special").get<bool>()), expected)
        << ::testing::PrintToString(text) << " add_special=" << c.at("add_special").get<bool>()
        << " parse_special=" << c.at("parse_special").get<bool>();
  }
}

TEST_F(SpmTokenizer, LeadingSpaceAndByteFallback) {
  EXPECT_TRUE(tok_->adds_bos());  // SentencePiece default
  // "▁Hello" is reachable through "▁H" + "e" -> "▁He", "l" + "l" -> "ll", "ll" + "o" -> "llo".
  EXPECT_EQ(tok_->encode("Hello", true, false), (std::vector<int32_t>{1, id_of("\xE2\x96\x81Hello")}));
  // U+1F600 is not a piece: four <0xXX> byte tokens.
  EXPECT_EQ(tok_->encode("\xF0\x9F\x98\x80", false, false),
            (std::vector<int32_t>{id_of("\xE2\x96\x81"), id_of("<0xF0>"), id_of("<0x9F>"),
                                  id_of("<0x98>"), id_of("<0x80>")}));
}

TEST_F(SpmTokenizer, DecodeRemovesTheAddedSpaceOnce) {
  for (const std::string text : {"hello world", "this is a test", "  two", "café 😀 中文"}) {
    const std::vector<int32_t> ids = tok_->encode(text, true, false);
    EXPECT_EQ(tok_->decode(ids, /*skip_special=*/true), text);
    IncrementalDetokenizer d(*tok_, /*skip_special=*/true, /*start_of_text=*/true);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = d.push(id);
      EXPECT_EQ(sanitize_utf8(piece), piece);
      streamed += piece;
    }
    EXPECT_EQ(streamed + d.flush(), text);
  }
  EXPECT_EQ(tok_->token_bytes(id_of("<0x41>")), "A");
  EXPECT_EQ(tok_->token_bytes(id_of("\xE2\x96\x81the")), " the");
}

TEST_F(SpmTokenizer, StreamingAContinuationKeepsTheFirstSpace) {
  // Generated tokens after a prompt: "▁world" is " world", not "world".
  IncrementalDetokenizer d(*tok_);
  EXPECT_EQ(d.push(id_of("\xE2\x96\x81world")), " world");
  EXPECT_EQ(d.push(id_of("!")), "!");
  EXPECT_EQ(tok_->decode(std::vector<int32_t>{id_of("\xE2\x96\x81world")}, true), "world");
}

// SentencePiece writes spaces as U+2581 before it segments (llama.cpp's
// llama_escape_whitespace), so a U+2581 already in the text is a space to it: the same ids as
// a space, decoded as a space. Found by fuzz_tokenizer, whose round-trip check had expected
// the text back byte for byte (the last case is its input).
TEST_F(SpmTokenizer, ASpaceMarkerInTheTextIsASpace) {
  const std::string marker = "\xE2\x96\x81";
  for (const std::string& text : {"a" + marker + "b", marker + "the", marker,
                                 std::string("  `l") + marker + "<f\x01K2a"}) {
    std::string spaced = text;
    for (size_t at; (at = spaced.find(marker)) != std::string::npos;) {
      spaced.replace(at, marker.size(), " ");
    }
    const std::vector<int32_t> ids = tok_->encode(text, true, false);
    EXPECT_EQ(ids, tok_->encode(spaced, true, false)) << ::testing::PrintToString(text);
    EXPECT_EQ(tok_->decode(ids, /*skip_special=*/true), spaced) << ::testing::PrintToString(text);
  }
}

TEST_F(SpmTokenizer, LoadsFromGguf) {
  std::unique_ptr<GgufFile> file = gguf_image(vocab_);
  ASSERT_NE(file, nullptr);
  auto tok = tokenizer_from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->vocab_size(), static_cast<int>(vocab_.tokens.size()));
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_TRUE((*tok)->is_end_of_generation(2));
  EXPECT_EQ((*tok)->encode("Hello world", true, false), tok_->encode("Hello world", true, false));
}

TEST_F(SpmTokenizer, NoSpacePrefixWhenTheFileSaysSo) {
  TokenizerVocab v = vocab_;
  v.add_space_prefix = false;
  auto tok = tokenizer_from_vocab(v);
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ((*tok)->encode("Hello", false, false), (std::vector<int32_t>{id_of("H"), id_of("e"), id_of("llo")}));
}

TEST(SpmErrors, BadByteTokenAndMissingKeys) {
  TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<0xZZ>"};
  v.token_types = {TokenType::kUnknown, TokenType::kByte};
  auto t = tokenizer_from_vocab(v);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("<0xZZ>"), std::string::npos);

  testing::GgufWriter w;
  w.add("general.architecture", testing::gguf_string("llama"));
  auto file = GgufFile::from_bytes(w.bytes());
  ASSERT_TRUE(file.ok());
  auto missing = tokenizer_from_gguf(**file);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tokenizer.ggml.model"), std::string::npos);
}

}  // namespace
}  // namespace flashserve::model
