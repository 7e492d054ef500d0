// The CPU forward pass (model/cpu/cpu_runner.h) on the real default model, against goldens
// from HF transformers (tests/data/model_smollm2_135m_q4_1.json, tools/golden/
// logits_golden.py) and against itself under different batchings of the same work.
// Skipped when models/ lacks the model file.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "model/text/tokenizer.h"
#include "model_forward_fixture.h"

namespace flashserve::model {
namespace {

using testing::argmax;
using testing::relative_error;

TEST_F(ModelForwardTest, GoldenConfigMatches) {
  const Json& c = golden_.at("config");
  EXPECT_EQ(config_.vocab_size, c.at("vocab_size").get<double>());
  EXPECT_EQ(config_.hidden_size, c.at("hidden_size").get<double>());
  EXPECT_EQ(config_.num_layers, c.at("num_layers").get<double>());
  EXPECT_EQ(config_.num_heads, c.at("num_heads").get<double>());
  EXPECT_EQ(config_.num_kv_heads, c.at("num_kv_heads").get<double>());
  EXPECT_FLOAT_EQ(config_.rope_theta, c.at("rope_theta").get<double>());
  EXPECT_FLOAT_EQ(config_.rms_eps, c.at("rms_eps").get<double>());
  EXPECT_EQ(config_.tied_embeddings, c.at("tie_word_embeddings").get<bool>());
}

// Prompt in one prefill, then the reference's greedy tokens one decode step at a time: at
// every step our argmax must be the reference's greedy token (so free-running greedy output
// is identical), and at the stored steps the logits must match within
// kMaxGoldenRelativeError over the stored ids (top-10 and the fixed sample).
TEST_F(ModelForwardTest, LogitsAndGreedyTokensMatchTransformers) {
  const std::vector<int32_t> sample_ids = ids_of(golden_.at("sample_ids"));
  ASSERT_GE(golden_.at("cases").size(), 5u);
  double worst = 0;
  for (const Json& gc : golden_.at("cases")) {
    SCOPED_TRACE(gc.at("prompt").get<std::string>());
    next_block_ = 0;
    const std::vector<int32_t> prompt = ids_of(gc.at("prompt_ids"));
    const std::vector<int32_t> greedy = ids_of(gc.at("greedy_ids"));
    ASSERT_GE(greedy.size(), 32u);
    TestSequence seq = new_sequence(prompt.size() + greedy.size());
    std::vector<float> logits = feed(runner_.get(), &seq, prompt);
    size_t next_record = 0;
    const auto& records = gc.at("steps");
    for (size_t step = 0; step < greedy.size(); ++step) {
      if (step > 0) logits = feed(runner_.get(), &seq, std::span(&greedy[step - 1], 1));
      EXPECT_EQ(argmax(logits), greedy[step])
          << "step " << step << ", reference margin " << gc.at("greedy_margins").at(step).get<double>();
      if (next_record < records.size() && records[next_record].at("step").get<double>() == step) {
        const Json& r = records[next_record++];
        std::vector<int32_t> ids = ids_of(r.at("top_ids"));
        ids.insert(ids.end(), sample_ids.begin(), sample_ids.end());
        std::vector<float> ref = floats_of(r.at("top_logits"));
        const std::vector<float> ref_sample = floats_of(r.at("sample_logits"));
        ref.insert(ref.end(), ref_sample.begin(), ref_sample.end());
        std::vector<float> ours;
        for (int32_t id : ids) ours.push_back(logits[id]);
        const double err = relative_error(ours, ref);
        worst = std::max(worst, err);
        EXPECT_LT(err, kMaxGoldenRelativeError) << "step " << step;
      }
    }
    EXPECT_EQ(next_record, records.size());
  }
  std::printf("worst relative logits error vs transformers: %.3g\n", worst);
}

// The model's best-known fact, decoded with our tokenizer: the prompt's first greedy token
// is " Paris".
TEST_F(ModelForwardTest, CapitalOfFranceContinuesWithParis) {
  auto tokenizer = tokenizer_from_gguf(*file_);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::vector<int32_t> prompt =
      (*tokenizer)->encode("The capital of France is", /*add_special=*/true,
                           /*parse_special=*/false);
  TestSequence seq = new_sequence(prompt.size());
  const std::vector<float> logits = feed(runner_.get(), &seq, prompt);
  const int32_t ids[] = {argmax(logits)};
  EXPECT_EQ((*tokenizer)->decode(ids, /*skip_special=*/true), " Paris");
}

// The golden's prompt ids come from transformers' GGUF tokenizer; they must be what our
// tokenizer (checked against llama.cpp in tests/unit/tokenizer) makes of the same text, or
// the goldens would test prompts the server never sends.
TEST_F(ModelForwardTest, GoldenPromptIdsMatchOurTokenizer) {
  auto tokenizer = tokenizer_from_gguf(*file_);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  for (const Json& gc : golden_.at("cases")) {
    EXPECT_EQ((*tokenizer)->encode(gc.at("prompt").get<std::string>(), /*add_special=*/true,
                                   /*parse_special=*/true),
              ids_of(gc.at("prompt_ids")))
        << gc.at("prompt").get<std::string>();
  }
}

}  // namespace
}  // namespace flashserve::model
