// Token auth: the token file format, reload, constant-time comparison's results, and the
// check on call metadata (one UNAUTHENTICATED message whatever failed).
#include "server/api/auth.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flashserve::api {
namespace {

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/flashserve_tokens_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(AuthTest, TokenFileSkipsCommentsBlankLinesAndWhitespace) {
  EXPECT_THAT(parse_token_file("# comment\n\n  alpha  \r\nbeta\n#gamma\n"),
              ::testing::ElementsAre("alpha", "beta"));
  EXPECT_TRUE(parse_token_file("# only a comment\n\n").empty());
}

TEST(AuthTest, ConstantTimeEqualsIsEquality) {
  EXPECT_TRUE(constant_time_equals("secret", "secret"));
  EXPECT_FALSE(constant_time_equals("secreT", "secret"));
  EXPECT_FALSE(constant_time_equals("secret1", "secret"));
  EXPECT_FALSE(constant_time_equals("secre", "secret"));
  EXPECT_FALSE(constant_time_equals("", "secret"));
  // "abab" against "ab" compares cyclically byte for byte but the lengths differ.
  EXPECT_FALSE(constant_time_equals("abab", "ab"));
  EXPECT_TRUE(constant_time_equals("", ""));
}

TEST(AuthTest, LoadAcceptsEveryTokenAndReloadReplacesThem) {
  const std::string path = write_temp("alpha\nbeta\n");
  auto auth = TokenAuth::load(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ((*auth)->num_tokens(), 2);
  EXPECT_TRUE((*auth)->accepts("alpha"));
  EXPECT_TRUE((*auth)->accepts("beta"));
  EXPECT_FALSE((*auth)->accepts("gamma"));
  std::ofstream(path) << "gamma\n";
  ASSERT_TRUE((*auth)->reload().ok());
  EXPECT_FALSE((*auth)->accepts("alpha"));
  EXPECT_TRUE((*auth)->accepts("gamma"));
  // A reload that finds no token keeps the tokens in use.
  std::ofstream(path) << "# emptied by mistake\n";
  const absl::Status failed = (*auth)->reload();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(failed.message()), ::testing::HasSubstr("holds no token"));
  EXPECT_TRUE((*auth)->accepts("gamma"));
  std::remove(path.c_str());
}

// Issue 23: the scheme is case-insensitive (RFC 7235: "bearer" was refused); the token is not.
TEST(AuthTest, AuthorizationSchemeIsCaseInsensitive) {
  const std::string path = write_temp("alpha\n");
  auto auth = TokenAuth::load(path);
  std::remove(path.c_str());
  ASSERT_TRUE(auth.ok()) << auth.status();
  for (const char* value : {"Bearer alpha", "bearer alpha", "BEARER alpha", "bEaReR  alpha"}) {
    EXPECT_TRUE((*auth)->accepts_authorization(value)) << value;
  }
  for (const char* value : {"Bearer Alpha", "Bearer", "Bearer ", "Beareralpha", "Basic alpha",
                            "alpha", "", "Bearer alpha "}) {
    EXPECT_FALSE((*auth)->accepts_authorization(value)) << value;
  }
}

TEST(AuthTest, LoadRefusesAMissingOrEmptyFile) {
  EXPECT_EQ(TokenAuth::load("/nonexistent/tokens").status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::string path = write_temp("\n# nothing\n");
  EXPECT_EQ(TokenAuth::load(path).status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace flashserve::api
