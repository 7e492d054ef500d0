// The step budget's default (model/step_budget.h): 8,192 tokens only on the devices where it
// was measured to pay (compute capability 9.0 with >= 70 GiB: H100, H200), 2,048 elsewhere.
#include "model/step_budget.h"

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace flashserve::model {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(StepBudgetTest, LargeHopperGpusTakeTheLargeBudget) {
  // totalGlobalMem as the devices report it.
  EXPECT_EQ(cuda_default_step_tokens(int64_t{143771} << 20, 9, 0), 8192);  // H200 141 GB
  EXPECT_EQ(cuda_default_step_tokens(int64_t{81559} << 20, 9, 0), 8192);   // H100 80GB HBM3
  EXPECT_EQ(cuda_default_step_tokens(kLargeGpuBytes, 9, 0), 8192);         // the edge
}

TEST(StepBudgetTest, EveryOtherDeviceTakesTheSmallBudget) {
  EXPECT_EQ(cuda_default_step_tokens(kLargeGpuBytes - 1, 9, 0), 2048);
  EXPECT_EQ(cuda_default_step_tokens(80 * kGiB, 8, 0), 2048);   // A100 80GB: not measured
  EXPECT_EQ(cuda_default_step_tokens(48 * kGiB, 8, 9), 2048);   // L40S
  EXPECT_EQ(cuda_default_step_tokens(24 * kGiB, 8, 9), 2048);   // L4
  EXPECT_EQ(cuda_default_step_tokens(180 * kGiB, 10, 0), 2048);  // Blackwell: not measured
  EXPECT_EQ(kDefaultStepTokens, 2048);
}

TEST(StepBudgetTest, AStartThatTheDefaultBudgetDoesNotFitNamesTheFlag) {
  const absl::Status st = explain_default_step_budget(
      absl::ResourceExhaustedError("max_batch_tokens 8192 and max_num_seqs 256: the step "
                                   "workspace takes 900.0 MiB but GPU has 512.0 MiB"),
      8192);
  EXPECT_TRUE(absl::IsResourceExhausted(st));
  EXPECT_NE(st.message().find("takes 900.0 MiB"), std::string_view::npos) << st;
  EXPECT_NE(st.message().find("8192 tokens a step is this GPU's default"),
            std::string_view::npos) << st;
  EXPECT_NE(st.message().find("--max-batch-tokens 2048"), std::string_view::npos) << st;
}

TEST(StepBudgetTest, OtherErrorsAndTheSmallDefaultPassUnchanged) {
  const absl::Status bad = absl::InvalidArgumentError("bad file");
  EXPECT_EQ(explain_default_step_budget(bad, 8192), bad);
  const absl::Status full = absl::ResourceExhaustedError("no room");
  EXPECT_EQ(explain_default_step_budget(full, 2048), full);  // nothing smaller to suggest
  EXPECT_TRUE(explain_default_step_budget(absl::OkStatus(), 8192).ok());
}

}  // namespace
}  // namespace flashserve::model
