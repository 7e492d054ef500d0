// IncrementalDetokenizer: characters split across byte tokens are held back until complete,
// never emitted as broken UTF-8; invalid bytes become U+FFFD.
#include "model/text/detokenizer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/text/tokenizer.h"
#include "model/text/utf8.h"
#include "tests/unit/tokenizer/synthetic_vocab.h"

namespace flashserve::model {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";

class Detokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    // Only byte tokens (ids = byte values) and one control token, so every multi-byte
    // character is split across tokens.
    auto t = tokenizer_from_vocab(testing::byte_level_vocab({}, {"<|end|>"}));
    ASSERT_TRUE(t.ok()) << t.status();
    tok_ = *std::move(t);
  }
  std::vector<std::string> push_all(IncrementalDetokenizer& d, const std::string& bytes) {
    std::vector<std::string> out;
    for (unsigned char c : bytes) out.push_back(d.push(c));
    return out;
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(Detokenizer, EmojiIsHeldUntilItsLastByte) {
  IncrementalDetokenizer d(*tok_);
  EXPECT_EQ(push_all(d, "\xF0\x9F\x98\x80"), (std::vector<std::string>{"", "", "", "\xF0\x9F\x98\x80"}));
  EXPECT_EQ(d.flush(), "");
}

TEST_F(Detokenizer, CjkAndZwjSequencesStreamWithoutBrokenCharacters) {
  const std::string text = "中文 👨‍👩‍👧 ok";
  IncrementalDetokenizer d(*tok_);
  std::string streamed;
  for (const std::string& piece : push_all(d, text)) {
    EXPECT_EQ(sanitize_utf8(piece), piece);
    streamed += piece;
  }
  streamed += d.flush();
  EXPECT_EQ(streamed, text);
}

TEST_F(Detokenizer, ThroughTheEncoder) {
  const std::string text = "naïve 😀 日本";
  const std::vector<int32_t> ids = tok_->encode(text, false, false);
  EXPECT_EQ(ids.size(), text.size());  // no merges: one token per byte
  IncrementalDetokenizer d(*tok_);
  std::string streamed;
  for (int32_t id : ids) streamed += d.push(id);
  EXPECT_EQ(streamed + d.flush(), text);
}

TEST_F(Detokenizer, InvalidBytesBecomeReplacementCharacters) {
  IncrementalDetokenizer d(*tok_);
  EXPECT_EQ(d.push(0xFF), kReplacement);  // can never be valid: emitted at once
  EXPECT_EQ(d.push(0xE4), "");            // may start a 3-byte character
  EXPECT_EQ(d.push('A'), std::string(kReplacement) + "A");
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.push(0x9F), "");
  EXPECT_EQ(d.flush(), std::string(kReplacement) + kReplacement);  // truncated at the end
  EXPECT_EQ(d.flush(), "");
}

TEST_F(Detokenizer, SkipsControlTokensUnlessAsked) {
  const int32_t end = 256;
  IncrementalDetokenizer skip(*tok_);
  EXPECT_EQ(skip.push('a'), "a");
  EXPECT_EQ(skip.push(end), "");
  IncrementalDetokenizer keep(*tok_, /*skip_special=*/false);
  EXPECT_EQ(keep.push(end), "<|end|>");
  EXPECT_EQ(keep.push(-1), "");  // out of range contributes nothing
}

TEST_F(Detokenizer, ControlTokenInsideACharacterDoesNotBreakIt) {
  // A skipped control token between the bytes of one character: the character still
  // completes, matching decode() of the whole sequence.
  IncrementalDetokenizer d(*tok_);
  EXPECT_EQ(d.push(0xE4), "");
  EXPECT_EQ(d.push(256), "");
  EXPECT_EQ(d.push(0xB8), "");
  EXPECT_EQ(d.push(0xAD), "中");
}

}  // namespace
}  // namespace flashserve::model
