// flashserve-bench-engine-host itself, on the default model's tokenizer: a short load prints
// one table row per round, with as many decode-only steps as the requests' new tokens need,
// and a bad command line is refused with a message.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/run_tool.h"

namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

constexpr char kModel[] = FLASHSERVE_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

int run_bench(const std::string& args, std::string* output) {
  return flashserve::testing::run_built_tool("flashserve-bench-engine-host", args, output);
}

TEST(EngineHostBench, OneRowPerRound) {
  std::string out;
  ASSERT_EQ(run_bench(std::string("--model ") + kModel +
                          " --streams 4 --prompt_tokens 20 --new_tokens 10 --rounds 2",
                      &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("| round | streams | steps (decode-only) |"));
  // 10 new tokens: the prompt step samples the first, then at least 9 decode-only steps (more
  // when the four requests arrive over more than one step).
  for (const char* round : {"1", "2"}) {
    EXPECT_THAT(out, ContainsRegex(std::string("\\| ") + round +
                                   " \\| 4 \\| [0-9]+ \\(([89]|[1-9][0-9])\\) \\| [0-9.]+ \\|"));
  }
}

TEST(EngineHostBench, RefusesABadCommandLine) {
  std::string out;
  EXPECT_EQ(run_bench("--streams 4", &out), 1);
  EXPECT_THAT(out, HasSubstr("--model is required"));
  EXPECT_EQ(run_bench(std::string("--model ") + kModel + " --streams 0", &out), 1);
  EXPECT_THAT(out, HasSubstr("must be >= 1"));
}

}  // namespace
