// The server log (server/api/log.h): text and JSON lines, escaping, the format flag.
#include "server/api/log.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace flashserve::api {
namespace {

using ::testing::HasSubstr;

TEST(LogTest, TextLineHasTimeLevelMessageAndFields) {
  const Logger logger(LogFormat::kText);
  EXPECT_EQ(logger.format_line("T", LogLevel::kInfo, "access",
                               {{"method", std::string_view("Generate")},
                                {"request_id", int64_t{7}},
                                {"total_seconds", 0.25},
                                {"error", std::string_view("bad input")},
                                {"empty", std::string_view("")}}),
            "T flashserve: info: access method=Generate request_id=7 total_seconds=0.25 "
            "error=\"bad input\" empty=\"\"");
  EXPECT_EQ(logger.format_line("T", LogLevel::kError, "cannot load", {}),
            "T flashserve: error: cannot load");
}

TEST(LogTest, JsonLineIsOneEscapedObject) {
  const Logger logger(LogFormat::kJson);
  EXPECT_EQ(logger.format_line("2026-12-01T00:00:00.000Z", LogLevel::kWarning,
                               "say \"hi\"\n\tback\\slash\x01",
                               {{"n", int64_t{-3}}, {"x", 1.5}, {"s", std::string_view("a b")}}),
            "{\"time\":\"2026-12-01T00:00:00.000Z\",\"level\":\"warning\","
            "\"msg\":\"say \\\"hi\\\"\\n\\tback\\\\slash\\u0001\",\"n\":-3,\"x\":1.5,"
            "\"s\":\"a b\"}");
}

TEST(LogTest, LogWritesOneLinePerCall) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  const Logger logger(LogFormat::kJson, out);
  logger.info("first", {{"k", int64_t{1}}});
  logger.error("second");
  std::rewind(out);
  char buffer[512] = {};
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, out);
  std::fclose(out);
  const std::string text(buffer, n);
  ASSERT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
  EXPECT_THAT(text, HasSubstr("\"level\":\"info\",\"msg\":\"first\",\"k\":1}\n"));
  EXPECT_THAT(text, HasSubstr("\"level\":\"error\",\"msg\":\"second\"}\n"));
  EXPECT_THAT(text, ::testing::MatchesRegex(
                        "\\{\"time\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z\".*"));
}

TEST(LogTest, ParseLogFormatNamesTheBadValue) {
  EXPECT_EQ(*parse_log_format("text"), LogFormat::kText);
  EXPECT_EQ(*parse_log_format("json"), LogFormat::kJson);
  const auto bad = parse_log_format("yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'yaml'"));
}

}  // namespace
}  // namespace flashserve::api
