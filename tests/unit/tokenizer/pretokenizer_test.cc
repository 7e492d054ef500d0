// Pre-tokenizer splits (PCRE2) against the Python `regex` module running the original HF
// patterns (tests/data/tokenizer_pretokenizer_splits.json), plus UTF-8 sanitizing.
#include "model/text/pretokenizer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/text/utf8.h"
#include "tests/support/json.h"

namespace flashserve::model {
namespace {

using testing::from_hex;

std::vector<std::string> split(const Pretokenizer& p, const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view piece : p.split(text)) out.emplace_back(piece);
  return out;
}

TEST(Pretokenizer, SplitsMatchPythonRegexOnTheCorpus) {
  const testing::Json root = testing::read_json_file("tests/data/tokenizer_pretokenizer_splits.json");
  ASSERT_GE(root.at("cases").size(), 200u);
  for (const char* name : {"gpt-2", "smollm", "llama-bpe", "qwen2", "qwen35"}) {
    auto pre = Pretokenizer::create(name);
    ASSERT_TRUE(pre.ok()) << pre.status();
    int num_mismatches = 0;
    for (const testing::Json& c : root.at("cases")) {
      const std::string text = from_hex(c.at("hex").get<std::string>());
      std::vector<std::string> expected;
      for (const testing::Json& piece : c.at("pieces").at(name)) {
        expected.push_back(from_hex(piece.get<std::string>()));
      }
      const std::vector<std::string> got = split(*pre, text);
      if (got != expected) {
        ++num_mismatches;
        ADD_FAILURE() << name << " on " << ::testing::PrintToString(text)
                      << "\n  ours:  " << ::testing::PrintToString(got)
                      << "\n  regex: " << ::testing::PrintToString(expected);
      }
    }
    EXPECT_EQ(num_mismatches, 0) << name;
  }
}

TEST(Pretokenizer, SmollmSplitsEveryDigit) {
  auto pre = Pretokenizer::create("smollm");
  ASSERT_TRUE(pre.ok());
  EXPECT_EQ(split(*pre, "abc 123"), (std::vector<std::string>{"abc", " ", "1", "2", "3"}));
  auto llama3 = Pretokenizer::create("llama-bpe");
  ASSERT_TRUE(llama3.ok());
  EXPECT_EQ(split(*llama3, "12345"), (std::vector<std::string>{"123", "45"}));
  EXPECT_TRUE(llama3->ignore_merges());
  EXPECT_TRUE(llama3->default_add_bos());
}

TEST(Pretokenizer, ConcatenationIsTheInput) {
  auto pre = Pretokenizer::create("gpt-2");
  ASSERT_TRUE(pre.ok());
  const std::string text = "  a\t\tb \n\n  c'LL 'll 😀😀 12\u00a0x  ";
  std::string joined;
  for (std::string_view piece : pre->split(text)) {
    EXPECT_FALSE(piece.empty());
    joined += piece;
  }
  EXPECT_EQ(joined, text);
}

TEST(Pretokenizer, UnknownNameIsAClearError) {
  auto pre = Pretokenizer::create("no-such-pre");
  ASSERT_FALSE(pre.ok());
  EXPECT_EQ(pre.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pre.status().message().find("'no-such-pre'"), std::string::npos);
  EXPECT_NE(pre.status().message().find("smollm"), std::string::npos);
  auto missing = Pretokenizer::create("");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tokenizer.ggml.pre is missing"), std::string::npos);
}

TEST(Utf8, SanitizeReplacesEachBadByte) {
  EXPECT_EQ(sanitize_utf8("abc"), "abc");
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_EQ(sanitize_utf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(sanitize_utf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");      // truncated
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");      // overlong
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(sanitize_utf8("\xC3(" ), "\xEF\xBF\xBD(");
}

TEST(Utf8, IncompleteSequences) {
  EXPECT_TRUE(is_incomplete_utf8_sequence("\xF0\x9F\x98", 0));
  EXPECT_TRUE(is_incomplete_utf8_sequence("\xE4", 0));
  EXPECT_FALSE(is_incomplete_utf8_sequence("\xE4\x41", 0));
  EXPECT_FALSE(is_incomplete_utf8_sequence("\xFF", 0));
  EXPECT_FALSE(is_incomplete_utf8_sequence("\xED\xA0", 0));  // would be a surrogate
  EXPECT_FALSE(is_incomplete_utf8_sequence("a", 0));
}

}  // namespace
}  // namespace flashserve::model
