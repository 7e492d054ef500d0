// Every architecture against HF transformers: random-weight files written by
// flashserve-make-gguf (the same bytes the golden script loaded into HF: their FNV-1a hash
// is checked), run by our CPU runner at the golden's prompts (1, 17 and 300 tokens, and for
// Llama 3 RoPE scaling one of 8,250 tokens: positions past 8192), logits compared with
// tests/data/model_arch_random.json (tools/golden/arch_logits_golden.py).
//
// Tolerance: the relative error ||ours - HF|| / ||HF|| over the stored logits of a prompt
// (top-10 and 64 sampled ids) must be < 1e-4. Both sides are fp32 with different summation
// orders (OpenBLAS vs PyTorch); measured: the largest error over all cases is printed by
// the test and is ~1e-6 (tests/data/README.md). The argmax must equal HF's wherever HF's
// best-minus-second margin exceeds 1e-3 of the logit norm (a smaller margin is a tie at this
// precision). The Llama 3 case also shows the check can fail: without the file's RoPE
// factors the far-position prompt's error exceeds the tolerance by orders of magnitude.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "make_gguf_test_util.h"
#include "model/cpu/cpu_runner.h"
#include "model/cpu/cpu_weights.h"
#include "model/gguf/gguf.h"
#include "model/model_loader.h"
#include "model/weights.h"
#include "tests/support/arch_cases.h"

namespace flashserve::tools {
namespace {

using nlohmann::json;

constexpr double kTolerance = 1e-4;
constexpr double kTieFraction = 1e-3;

// Logits of the last token of `prompt` (one prefill; blocks 0.. of the cache).
std::vector<float> last_logits(model::ModelRunner* runner, const json& prompt) {
  const model::ForwardBatch b =
      testing::prefill_batch(prompt["ids"], prompt["positions"], runner->kv_block_size());
  std::vector<float> logits;
  const absl::Status s = testing::logits_runner(runner)->forward_logits(
      b, runner->config().num_layers, &logits);
  EXPECT_TRUE(s.ok()) << s;
  return logits;
}

// ||ours - ref|| / ||ref|| over the golden's stored logits of one prompt.
double stored_error(const std::vector<float>& ours, const json& prompt, const json& sample_ids) {
  double diff = 0, ref = 0;
  auto add = [&](int id, double value) {
    diff += (ours[id] - value) * (ours[id] - value);
    ref += value * value;
  };
  for (size_t i = 0; i < prompt["top_ids"].size(); ++i) add(prompt["top_ids"][i], prompt["top_logits"][i]);
  for (size_t i = 0; i < sample_ids.size(); ++i) add(sample_ids[i], prompt["sample_logits"][i]);
  return std::sqrt(diff / ref);
}

// A golden case's file, written to `path` and opened, with its config and the reference
// load of its weights (fp32). False, with the test failure, when a step fails.
struct OpenedCase {
  std::unique_ptr<model::GgufFile> file;
  model::ModelConfig config;
  std::shared_ptr<const model::LlamaWeights> weights;
};
bool open_case(const json& c, const std::string& path, OpenedCase* out) {
  if (!testing::write_arch_case(c, path)) return false;
  absl::StatusOr<std::unique_ptr<model::GgufFile>> file = model::GgufFile::open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return false;
  out->file = std::move(*file);
  absl::StatusOr<model::ModelConfig> config = model::config_from_gguf(*out->file);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return false;
  out->config = std::move(*config);
  absl::StatusOr<model::LlamaWeights> weights = model::load_llama_weights(*out->file, out->config);
  EXPECT_TRUE(weights.ok()) << weights.status();
  if (!weights.ok()) return false;
  out->weights = std::make_shared<const model::LlamaWeights>(std::move(*weights));
  return true;
}

class ArchGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModelPath)) GTEST_SKIP() << kModelPath << " is absent";
    golden_case_ = testing::arch_case(GetParam());
    ASSERT_FALSE(golden_case_.is_null()) << "no golden case " << GetParam();
  }
  json golden_case_;
};

TEST_P(ArchGoldenTest, CpuRunnerMatchesTransformers) {
  const std::string path = temp_path("arch_" + GetParam() + ".gguf");
  ASSERT_TRUE(testing::write_arch_case(golden_case_, path));
  model::LoadOptions options;
  options.device = model::Device::kCpu;
  options.num_kv_blocks = 160;  // the 8,250-token prompt of the llama3 case
  options.num_threads = 1;
  options.weights = model::Weights::kBf16;  // on the CPU: the dequantized fp32 reference path
  absl::StatusOr<model::LoadedModel> m = model::load_model(path, options);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.architecture, GetParam() == "llama3" ? "llama" : GetParam());
  double worst = 0;
  for (const json& prompt : golden_case_["prompts"]) {
    const std::vector<float> logits = last_logits(m->runner.get(), prompt);
    ASSERT_EQ(logits.size(), static_cast<size_t>(m->config.vocab_size));
    const double err = stored_error(logits, prompt, golden_case_["sample_ids"]);
    worst = std::max(worst, err);
    EXPECT_LT(err, kTolerance) << prompt["ids"].size() << " tokens";
    if (prompt["margin"].get<double>() > kTieFraction * prompt["norm"].get<double>()) {
      EXPECT_EQ(testing::argmax(logits), prompt["argmax"].get<int>()) << prompt["ids"].size() << " tokens";
    }
  }
  std::printf("[arch %s] largest relative error %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Architectures, ArchGoldenTest,
                         ::testing::Values("llama3", "mistral", "qwen2", "qwen3", "gemma3", "phi3"));

// Without the file's Llama 3 factors the far-position prompt misses the reference: the
// check above would catch a loader that ignores rope_freqs.weight.
TEST(ArchGoldenScalingTest, IgnoringLlama3FactorsFailsTheCheck) {
  if (!std::filesystem::exists(kModelPath)) GTEST_SKIP() << kModelPath << " is absent";
  const json c = testing::arch_case("llama3");
  ASSERT_FALSE(c.is_null());
  OpenedCase o;
  ASSERT_TRUE(open_case(c, temp_path("arch_llama3_noscale.gguf"), &o));
  ASSERT_EQ(o.config.rope_freq_factors.size(), 32u);
  o.config.rope_freq_factors.clear();
  auto runner = model::CpuModelRunner::create(o.config, o.weights,
                                              model::CpuRunnerOptions{.num_kv_blocks = 160});
  ASSERT_TRUE(runner.ok()) << runner.status();
  const json& far = c["prompts"].back();
  ASSERT_GT(far["positions"].back().get<int>(), 8192);
  const double err = stored_error(last_logits(runner->get(), far), far, c["sample_ids"]);
  std::printf("[arch llama3] error without the RoPE factors: %.3g\n", err);
  EXPECT_GT(err, 10 * kTolerance);
}

// The CPU runner's in-place weights (CpuWeights::native: ggml blocks viewed where they lie,
// fused tensors split into views, RoPE rows permuted in copies) hold, row for row, the values
// of the reference load that the golden test above checks (load_llama_weights: fp32, split
// and permuted as vectors), for the cases whose rows are permuted or fused.
TEST(ArchGoldenNativeTest, InPlaceWeightsEqualTheCheckedLoadRowForRow) {
  if (!std::filesystem::exists(kModelPath)) GTEST_SKIP() << kModelPath << " is absent";
  for (const std::string name : {"qwen3", "gemma3", "phi3"}) {
    SCOPED_TRACE(name);
    const json c = testing::arch_case(name);
    ASSERT_FALSE(c.is_null());
    OpenedCase o;
    ASSERT_TRUE(open_case(c, temp_path("arch_native_" + name + ".gguf"), &o));
    const model::LlamaWeights* ref = o.weights.get();
    auto native = model::CpuWeights::native(*o.file, o.config);
    ASSERT_TRUE(native.ok()) << native.status();
    for (int layer = 0; layer < o.config.num_layers; ++layer) {
      const model::CpuLayerWeights& n = (*native)->layers[layer];
      const model::LayerWeights& r = ref->layers[layer];
      const std::pair<const model::CpuMatrix*, const std::vector<float>*> pairs[] = {
          {&n.wq, &r.wq}, {&n.wk, &r.wk}, {&n.wv, &r.wv}, {&n.w_gate, &r.w_gate}, {&n.w_up, &r.w_up}};
      for (const auto& [m, v] : pairs) {
        ASSERT_TRUE(m->quantized());  // Q8_0 blocks, viewed in place
        ASSERT_EQ(static_cast<size_t>(m->rows * m->cols), v->size());
        std::vector<float> row(m->cols);
        for (int64_t i = 0; i < m->rows; ++i) {
          m->row_to_float(i, row.data());
          ASSERT_TRUE(std::equal(row.begin(), row.end(), v->begin() + i * m->cols))
              << "layer " << layer << " row " << i;
        }
      }
    }
  }
}

// Each of Gemma 3's differences matters to the check: with any one of them dropped from the
// config (the weights as loaded), some prompt of the gemma3 case misses the reference by far.
TEST(ArchGoldenScalingTest, DroppingAnyGemma3DifferenceFailsTheCheck) {
  if (!std::filesystem::exists(kModelPath)) GTEST_SKIP() << kModelPath << " is absent";
  const json c = testing::arch_case("gemma3");
  ASSERT_FALSE(c.is_null());
  OpenedCase o;
  ASSERT_TRUE(open_case(c, temp_path("arch_gemma3_ablation.gguf"), &o));
  ASSERT_EQ(o.config.sliding_window, 40);
  ASSERT_FALSE(o.config.rope_freq_factors.empty());  // the global layers' linear x8
  const std::pair<const char*, void (*)(model::ModelConfig*)> drops[] = {
      {"window", [](model::ModelConfig* m) { m->sliding_window = 0; }},
      {"local RoPE base", [](model::ModelConfig* m) { m->rope_theta_local = m->rope_theta; }},
      {"global RoPE scaling", [](model::ModelConfig* m) { m->rope_freq_factors.clear(); }},
      {"embedding scale", [](model::ModelConfig* m) { m->embedding_scale = 1.f; }},
      {"post-norms", [](model::ModelConfig* m) { m->post_norms = false; }},
      {"GeGLU", [](model::ModelConfig* m) { m->gelu_ffn = false; }},
  };
  for (const auto& [what, drop] : drops) {
    model::ModelConfig changed = o.config;
    drop(&changed);
    auto runner = model::CpuModelRunner::create(changed, o.weights,
                                                model::CpuRunnerOptions{.num_kv_blocks = 160});
    ASSERT_TRUE(runner.ok()) << runner.status();
    double worst = 0;
    for (const json& prompt : c["prompts"]) {
      worst = std::max(worst, stored_error(last_logits(runner->get(), prompt), prompt, c["sample_ids"]));
    }
    std::printf("[arch gemma3] error without the %s: %.3g\n", what, worst);
    EXPECT_GT(worst, 10 * kTolerance) << what;
  }
}

}  // namespace
}  // namespace flashserve::tools
