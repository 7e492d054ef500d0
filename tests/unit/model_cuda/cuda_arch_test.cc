// The CUDA runner against the CPU runner (itself checked against HF transformers by
// tests/unit/make_gguf/arch_golden_test.cc) for every architecture's random-weight case of
// tests/data/model_arch_random.json: Q/K/V biases (qwen2), per-head Q/K norms (qwen3), Llama 3
// RoPE factors over 8,250 positions (llama3), the llama layout under another name
// (mistral); gemma3 and phi3, which the CUDA runner refuses, only for that refusal. Each golden prompt runs as a prefill (1 token: the GEMV path; 17 and 300: the
// GEMM path), then 4 decode steps (the GEMV path: with a bias or Q/K norms, the GEMV writes
// QKV and rope_qkv_append adds them), logits compared at every step.
//
// Tolerance: as cuda_runner_test.cc, relative to the error that bf16 weights alone cause (a
// CPU runner over the same weights rounded to bf16): at most kActivationFactor times it.
// Skipped (reported as skipped) without a GPU or the default model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/device.h"
#include "model/cpu/cpu_runner.h"
#include "base/bf16.h"
#include "model/model_loader.h"
#include "model/weights.h"
#include "tests/support/arch_cases.h"
#include "tests/support/forward_test_util.h"

namespace flashserve::model {
namespace {

using nlohmann::json;

constexpr double kActivationFactor = 2 * 4.28;  // cuda_runner_test.cc's bound
constexpr int kDecodeSteps = 4;

// A CPU runner over the file's weights rounded to bf16: the yardstick.
std::unique_ptr<CpuModelRunner> bf16_weights_runner(const LoadedModel& m) {
  absl::StatusOr<LlamaWeights> w = load_llama_weights(*m.file, m.config);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return nullptr;
  testing::round_matrices_to_bf16(&*w);
  auto r = CpuModelRunner::create(m.config, std::make_shared<const LlamaWeights>(std::move(*w)),
                                  CpuRunnerOptions{.num_kv_blocks = 160});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? std::move(*r) : nullptr;
}

// Logits of `runner` for the prompt's prefill, then of kDecodeSteps decode steps. The
// tokens decoded: *feed when it holds kDecodeSteps tokens, else the runner's own greedy
// choices, appended to *feed (the CPU's, so that every runner then sees the same inputs).
std::vector<std::vector<float>> run(ModelRunner* runner, const json& prompt,
                                    std::vector<int32_t>* feed) {
  std::vector<int32_t> ids = prompt["ids"], positions = prompt["positions"];
  const bool choose = feed->empty();
  std::vector<std::vector<float>> out(1);
  LogitsRunner* lr = testing::logits_runner(runner);
  const int layers = runner->config().num_layers, block = runner->kv_block_size();
  EXPECT_TRUE(lr->forward_logits(testing::prefill_batch(ids, positions, block), layers, &out[0]).ok());
  for (int i = 0; i < kDecodeSteps; ++i) {
    if (choose) feed->push_back(testing::argmax(out.back()));
    ids.push_back((*feed)[i]);
    positions.push_back(positions.back() + 1);
    ForwardBatch step = testing::prefill_batch(ids, positions, block);  // tables of the whole
    step.token_ids = {ids.back()};                                      // sequence, but only
    step.positions = {positions.back()};                                // the new token runs
    step.slot_mapping = {step.slot_mapping.back()};
    step.cu_seqlens_q = {0, 1};
    out.emplace_back();
    EXPECT_TRUE(lr->forward_logits(step, layers, &out.back()).ok());
  }
  return out;
}

// Native weights (Q8_0 blocks on the device, int8-rounded activations in the GEMVs,
// kernels/quant/quant_gemv.h) are held to kNativeFactor times the same yardstick.
constexpr double kNativeFactor = 2 * 4.28;

class CudaArchTest : public ::testing::TestWithParam<std::tuple<std::string, Weights>> {
 protected:
  std::string arch() const { return std::get<0>(GetParam()); }
  Weights weights() const { return std::get<1>(GetParam()); }
};

TEST_P(CudaArchTest, LogitsWithinTheBf16Yardstick) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  if (!std::filesystem::exists(testing::arch_tokenizer_source())) GTEST_SKIP() << "no tokenizer source";
  const json c = testing::arch_case(arch());
  ASSERT_FALSE(c.is_null());
  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / ("cuda_arch_" + arch() + ".gguf")).string();
  ASSERT_TRUE(testing::write_arch_case(c, path));
  LoadOptions o;
  o.num_kv_blocks = 160;  // the 8,250-token prompt of the llama3 case
  o.max_num_seqs = 4;
  o.device = Device::kCpu;
  o.weights = Weights::kBf16;  // on the CPU: the fp32 reference path (dequantized at load)
  absl::StatusOr<LoadedModel> cpu = load_model(path, o);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  o.device = Device::kCuda;
  o.weights = weights();
  absl::StatusOr<LoadedModel> gpu = load_model(path, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::unique_ptr<CpuModelRunner> w16 = bf16_weights_runner(*cpu);
  ASSERT_NE(w16, nullptr);
  for (const json& prompt : c["prompts"]) {
    std::vector<int32_t> feed;
    const auto ref = run(cpu->runner.get(), prompt, &feed);
    const auto yard = run(w16.get(), prompt, &feed);
    const auto got = run(gpu->runner.get(), prompt, &feed);
    for (size_t s = 0; s < ref.size(); ++s) {
      for (float x : got[s]) ASSERT_TRUE(std::isfinite(x));
      const double err = testing::relative_error(got[s], ref[s]);
      const double yardstick = testing::relative_error(yard[s], ref[s]);
      const bool native = weights() == Weights::kNative;
      std::printf("[cuda arch %s %s] %zu tokens, step %zu: rel err %.3e, bf16-weights %.3e (x%.2f)\n",
                  arch().c_str(), native ? "native" : "bf16", prompt["ids"].size(), s, err,
                  yardstick, err / yardstick);
      EXPECT_LE(err, (native ? kNativeFactor : kActivationFactor) * yardstick)
          << prompt["ids"].size() << " tokens, step " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, CudaArchTest,
                         ::testing::Combine(::testing::Values("llama3", "mistral", "qwen2", "qwen3"),
                                            ::testing::Values(Weights::kBf16, Weights::kNative)),
                         [](const auto& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) == Weights::kNative ? "_native" : "_bf16");
                         });

// gemma3 and phi3 have no CUDA forward pass (docs/models.md): --device cuda refuses their
// files naming the architecture (Unimplemented), and --device auto serves them on the CPU.
TEST(CudaArchRefusalTest, Gemma3AndPhi3AreRefusedOnCudaAndServedOnTheCpuByAuto) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  if (!std::filesystem::exists(testing::arch_tokenizer_source())) GTEST_SKIP() << "no tokenizer source";
  for (const std::string name : {"gemma3", "phi3"}) {
    SCOPED_TRACE(name);
    const json c = testing::arch_case(name);
    ASSERT_FALSE(c.is_null());
    const std::string path =
        (std::filesystem::path(::testing::TempDir()) / ("cuda_arch_" + name + ".gguf")).string();
    ASSERT_TRUE(testing::write_arch_case(c, path));
    LoadOptions o;
    o.num_kv_blocks = 16;
    o.device = Device::kCuda;
    absl::StatusOr<LoadedModel> gpu = load_model(path, o);
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnimplemented) << gpu.status();
    EXPECT_NE(gpu.status().message().find(name), std::string::npos) << gpu.status();
    o.device = Device::kAuto;
    absl::StatusOr<LoadedModel> any = load_model(path, o);
    ASSERT_TRUE(any.ok()) << any.status();
    EXPECT_EQ(any->config.architecture, name);
    EXPECT_EQ(any->device, "cpu");
  }
}

}  // namespace
}  // namespace flashserve::model
