// flashserve-generate's generation: one request through the engine, text streamed as it is
// produced, the model's greedy output, and the engine's errors passed through.
#include "tools/generate/generate.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/engine_test_util.h"

namespace flashserve::tools {
namespace {

using namespace ::flashserve::engine::fakes;  // NOLINT: fakes and helpers

std::unique_ptr<model::ModelRunner> make_runner(std::shared_ptr<FakeRunnerState> state) {
  return std::make_unique<FakeRunner>(std::move(state), /*num_kv_blocks=*/16, /*block_size=*/4,
                                      /*context_length=*/64);
}

TEST(GenerateTest, StreamsTheGreedyOutputOfTheModel) {
  auto state = std::make_shared<FakeRunnerState>();
  FakeTokenizer tokenizer;
  GenerateOptions options;
  options.prompt_tokens = make_prompt(4, 7);
  options.max_new_tokens = 9;
  options.sampling.temperature = 0;
  std::vector<std::string> pieces;
  absl::StatusOr<GenerateResult> r = generate(make_runner(state), tokenizer, options,
                                              [&](std::string_view t) { pieces.emplace_back(t); });
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<int32_t> want = reference_greedy(*state, options.prompt_tokens, 9);
  EXPECT_EQ(r->token_ids, want);
  EXPECT_EQ(r->text, tokenizer.decode(want, /*skip_special=*/true));
  EXPECT_EQ(r->finish_reason, engine::FinishReason::kLength);
  std::string streamed;
  for (const std::string& p : pieces) streamed += p;
  EXPECT_EQ(streamed, r->text);
  EXPECT_GT(pieces.size(), 1u);  // streamed, not printed at the end
}

TEST(GenerateTest, StopsAtEndOfGenerationWithoutItsText) {
  auto state = std::make_shared<FakeRunnerState>();
  const std::vector<int32_t> prompt = make_prompt(2, 3);
  state->next_token = scripted(prompt.size(), {letter('o'), letter('k'), kEos, letter('x')});
  FakeTokenizer tokenizer;
  GenerateOptions options{.prompt_tokens = prompt, .max_new_tokens = 10, .sampling = {}};
  options.sampling.temperature = 0;
  absl::StatusOr<GenerateResult> r = generate(make_runner(state), tokenizer, options, nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->text, "ok");
  EXPECT_EQ(r->finish_reason, engine::FinishReason::kStop);
}

TEST(GenerateTest, RequestsThatDoNotFitAreRefusedNamingTheProblem) {
  FakeTokenizer tokenizer;
  GenerateOptions options{
      .prompt_tokens = make_prompt(1, 60), .max_new_tokens = 10, .sampling = {}};
  absl::StatusOr<GenerateResult> r =
      generate(make_runner(std::make_shared<FakeRunnerState>()), tokenizer, options, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("exceeds the context length 64"), std::string::npos)
      << r.status();
}

TEST(GenerateTest, AFailedForwardPassIsAnError) {
  auto state = std::make_shared<FakeRunnerState>();
  state->fail_on_call = 1;
  FakeTokenizer tokenizer;
  GenerateOptions options{.prompt_tokens = make_prompt(1, 5), .max_new_tokens = 3, .sampling = {}};
  absl::StatusOr<GenerateResult> r = generate(make_runner(state), tokenizer, options, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("injected failure"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace flashserve::tools
