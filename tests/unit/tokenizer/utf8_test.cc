// The UTF-8 validator (model/text/utf8.h): well-formedness per Unicode Table 3-7, and the
// rewrites the API layer applies before text goes into proto3 string fields.
#include "model/text/utf8.h"

#include "gtest/gtest.h"

namespace flashserve::model {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("plain ascii\n"));
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80"));  // é 中 😀
  EXPECT_TRUE(is_valid_utf8("\xF4\x8F\xBF\xBF"));                            // U+10FFFF
}

TEST(Utf8Test, RejectsMalformedText) {
  EXPECT_FALSE(is_valid_utf8("\xC3"));              // truncated
  EXPECT_FALSE(is_valid_utf8("\xF0\x9F\x98"));      // truncated 4-byte
  EXPECT_FALSE(is_valid_utf8("\x80"));              // lone continuation
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xFF"));
}

TEST(Utf8Test, ReplacesAndEscapesInvalidBytes) {
  EXPECT_EQ(sanitize_utf8("a\xC3" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(sanitize_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(escape_invalid_utf8("\xF0\x9F"), "\\xF0\\x9F");
  EXPECT_EQ(escape_invalid_utf8("x\xE4\xB8\xAD\xE4"), "x\xE4\xB8\xAD\\xE4");
  EXPECT_TRUE(is_valid_utf8(sanitize_utf8("\xFF\xC0\xAF\xED\xA0\x80 ok")));
}

}  // namespace
}  // namespace flashserve::model
