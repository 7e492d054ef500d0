// flashserve-bench-decode-step itself, on the default model: the CPU backend's dry run
// (prompts longer than a prefill step, several sequences packed into one step: every batch
// the bench builds must pass the runner's batch validation), the command-line errors, and
// --device cuda: without a GPU the loader's message and exit status 1, with one a short run
// whose tables include the kernel breakdown.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/run_tool.h"

namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = FLASHSERVE_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

int run_bench(const std::string& args, std::string* output) {
  return flashserve::testing::run_built_tool("flashserve-bench-decode-step", args, output);
}

TEST(DecodeStepBench, CpuDryRunPrintsOneRowPerBatchSize) {
  std::string out;
  // 70-token prompts in 50-token prefill steps: chunks, and chunks of two sequences in one step.
  ASSERT_EQ(run_bench(std::string("--model ") + kModel +
                          " --device cpu --batch-sizes 1,3 --context 70 --steps 2 --warmup 1"
                          " --threads 1 --max-batch-tokens 50",
                      &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("prefilled 3 x 70 tokens"));
  EXPECT_THAT(out, HasSubstr("## Decode step: weights native,"));
  EXPECT_THAT(out, HasSubstr("| N | CPU step p50 ms |"));
  for (const char* n : {"1", "3"}) {  // N, p50, p10-p90, tokens/s
    EXPECT_THAT(out, ::testing::ContainsRegex(std::string("\\| ") + n +
                                              " \\| [0-9.]+ \\| [0-9.]+-[0-9.]+ \\| [0-9]+ \\|"));
  }
}

TEST(DecodeStepBench, TwoWeightFormatsAndTheirDifference) {
  std::string out;
  ASSERT_EQ(run_bench(std::string("--model ") + kModel +
                          " --device cpu --weights native,bf16 --batch-sizes 2 --context 8"
                          " --steps 1 --warmup 0 --threads 1",
                      &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("## Decode step: weights native,"));
  EXPECT_THAT(out, HasSubstr("## Decode step: weights bf16,"));
  EXPECT_THAT(out, HasSubstr("### weights native minus weights bf16"));
  EXPECT_THAT(out, ::testing::ContainsRegex("\\| wall p50, graphs on \\| -?[0-9.]+ \\|"));
}

// --prompt-len: every measured step is a prefill of N prompts (the runner validates each
// batch; the CPU backend's dry run is enough to catch a malformed one).
TEST(DecodeStepBench, PrefillStepsOfNPromptsEach) {
  std::string out;
  ASSERT_EQ(run_bench(std::string("--model ") + kModel +
                          " --device cpu --batch-sizes 1,3 --prompt-len 12 --steps 2 --warmup 1"
                          " --threads 1 --max-batch-tokens 40",
                      &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("prefill steps of N x 12 new tokens"));
  for (const char* n : {"1", "3"}) {
    EXPECT_THAT(out, ::testing::ContainsRegex(std::string("\\| ") + n +
                                              " \\| [0-9.]+ \\| [0-9.]+-[0-9.]+ \\| [0-9]+ \\|"));
  }
  out.clear();
  EXPECT_EQ(run_bench(std::string("--model ") + kModel +
                          " --device cpu --batch-sizes 4 --prompt-len 12 --max-batch-tokens 40",
                      &out),
            2);
  EXPECT_THAT(out, HasSubstr("--prompt-len: 4 x 12 tokens exceed --max-batch-tokens 40"));
}

// --mixed-prompt-len: every measured step is the N decodes plus one prompt of a sequence of
// its own (longer than the decoders' context here, so its KV blocks are sized by it); the
// runner validates each batch, and the two step kinds exclude each other.
TEST(DecodeStepBench, MixedStepsOfNDecodesAndOnePrompt) {
  std::string out;
  ASSERT_EQ(run_bench(std::string("--model ") + kModel +
                          " --device cpu --batch-sizes 1,3 --context 8 --mixed-prompt-len 70"
                          " --steps 2 --warmup 1 --threads 1 --max-batch-tokens 80",
                      &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("steps of N decodes + one 70-token prompt"));
  for (const char* n : {"1", "3"}) {
    EXPECT_THAT(out, ::testing::ContainsRegex(std::string("\\| ") + n +
                                              " \\| [0-9.]+ \\| [0-9.]+-[0-9.]+ \\| [0-9]+ \\|"));
  }
  out.clear();
  EXPECT_EQ(run_bench(std::string("--model ") + kModel +
                          " --device cpu --batch-sizes 11 --mixed-prompt-len 70 --max-batch-tokens 80",
                      &out),
            2);
  EXPECT_THAT(out, HasSubstr("--mixed-prompt-len: 11 + 70 tokens exceed --max-batch-tokens 80"));
  out.clear();
  EXPECT_EQ(run_bench(std::string("--model ") + kModel +
                          " --device cpu --prompt-len 4 --mixed-prompt-len 4",
                      &out),
            2);
  EXPECT_THAT(out, HasSubstr("one or the other"));
}

TEST(DecodeStepBench, BadCommandLines) {
  std::string out;
  EXPECT_EQ(run_bench("--device cpu", &out), 2);
  EXPECT_THAT(out, HasSubstr("--model is required"));
  out.clear();
  EXPECT_EQ(run_bench("--model x --batch-sizes 4,x", &out), 2);
  EXPECT_THAT(out, HasSubstr("--batch-sizes: 'x' is not a count >= 1"));
  out.clear();
  EXPECT_EQ(run_bench("--model x --graphs maybe", &out), 2);
  EXPECT_THAT(out, HasSubstr("--graphs must be both, on or off, not 'maybe'"));
  out.clear();
  EXPECT_EQ(run_bench("--model x --weights native,fp8", &out), 2);
  EXPECT_THAT(out, HasSubstr("fp8"));
}

TEST(DecodeStepBench, CudaRunsOrSaysWhyNot) {
  std::string out;
  const int rc = run_bench(std::string("--model ") + kModel +
                               " --batch-sizes 2 --context 100 --steps 2 --warmup 2"
                               " --trace-steps 3",
                           &out);
  if (rc == 1) {  // no GPU or no CUDA backend: the loader's reason, before anything loads
    EXPECT_THAT(out, HasSubstr("device cuda"));
    return;
  }
  ASSERT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("| N | graphs on p50 ms |"));
  EXPECT_THAT(out, HasSubstr("GPU time by part, graphs on"));
  EXPECT_THAT(out, HasSubstr("GPU time by part, graphs off"));
  EXPECT_THAT(out, HasSubstr("| attention |"));
  EXPECT_THAT(out, HasSubstr("| final norm + LM head |"));
}

}  // namespace
