// bench/serving/step_breakdown.h and decode_step_tables.h: kernel names as CUPTI reports
// them (demangled symbols of kernels/, copied from `nm -C` of the built objects, and
// cuBLASLt's families), the exclusive-time attribution under overlapping (dependent)
// launches, the position rules (embedding, LM head) and the tables, on hand-made steps whose
// answers are worked out here.
#include "bench/serving/step_breakdown.h"

#include <gtest/gtest.h>

#include "bench/serving/decode_step_tables.h"

namespace flashserve::bench {
namespace {

constexpr const char* kQ4kGemm =
    "void flashserve::kernels::device::quant_gemm::(anonymous namespace)::quant_gemm_kernel<"
    "(flashserve::kernels::WeightFormat)4, 64>(flashserve::kernels::QuantGemmParams, int)";
constexpr const char* kQ6kGemm =
    "void flashserve::kernels::device::quant_gemm::(anonymous namespace)::quant_gemm_kernel<"
    "(flashserve::kernels::WeightFormat)6, 64>(flashserve::kernels::QuantGemmParams, int)";
constexpr const char* kRound =
    "flashserve::kernels::device::quant_round::(anonymous namespace)::round_kernel("
    "__nv_bfloat16*, long)";
constexpr const char* kNorm =
    "void flashserve::kernels::device::(anonymous namespace)::rmsnorm_kernel<__nv_bfloat16>("
    "flashserve::kernels::RmsNormParams)";
constexpr const char* kAttention =
    "void flashserve::kernels::device::attention_decode_kernel<__nv_bfloat16, 128>("
    "flashserve::kernels::AttentionParams, int, float*, float*)";
constexpr const char* kSampling =
    "void flashserve::kernels::device::sampling_kernel(flashserve::kernels::SamplingBatch)";
constexpr const char* kGemv =
    "void flashserve::kernels::device::gemv_kernel(flashserve::kernels::GemvParams)";

TEST(KernelNames, BaseNameDropsNamespacesTemplatesAndParameters) {
  EXPECT_EQ(kernel_base_name(kQ4kGemm), "quant_gemm_kernel");
  EXPECT_EQ(kernel_base_name(kRound), "round_kernel");
  constexpr const char* kNvjet = "nvjet_tst_128x64_64x4_1x2_h_bz_TNT";  // cuBLASLt: C name
  EXPECT_EQ(kernel_base_name(kNvjet), kNvjet);
}

TEST(KernelNames, PartsByName) {
  EXPECT_EQ(kernel_part(kQ4kGemm), Part::kQuantGemm);
  EXPECT_EQ(kernel_part(kRound), Part::kRoundActivations);
  EXPECT_EQ(kernel_part(kNorm), Part::kNorm);
  EXPECT_EQ(kernel_part(kAttention), Part::kAttention);
  EXPECT_EQ(kernel_part(kSampling), Part::kSampling);
  EXPECT_EQ(kernel_part(kGemv), Part::kGemv);
  EXPECT_EQ(kernel_part("void flashserve::kernels::device::quant_gemm::reduce_splits_kernel<"
                        "(flashserve::kernels::WeightFormat)4>(flashserve::kernels::"
                        "QuantGemmParams, int)"),
            Part::kSplitKReduce);
  EXPECT_EQ(kernel_part("nvjet_tst_128x64_64x4_1x2_h_bz_TNT"), Part::kCublasGemm);
  EXPECT_EQ(kernel_part("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64"),
            Part::kCublasGemm);
  EXPECT_EQ(kernel_part("void cublasLt::splitKreduce_kernel<32, 16, int, float>(...)"),
            Part::kSplitKReduce);
  EXPECT_EQ(kernel_part("void some_other_kernel(int)"), Part::kOtherKernel);
}

TEST(KernelNames, FormatFromTemplateArgument) {
  EXPECT_EQ(kernel_format(kQ4kGemm), "Q4_K");
  EXPECT_EQ(kernel_format(kQ6kGemm), "Q6_K");
  EXPECT_EQ(kernel_format(kNorm), "");
}

GpuActivity kernel(const char* name, uint64_t start, uint64_t end) {
  return {name, true, start, end};
}
GpuActivity copy(uint64_t start, uint64_t end) { return {"memcpy", false, start, end}; }

double part_ns(const StepTime& t, Part p) { return t.seconds[static_cast<int>(p)] * 1e9; }

TEST(BreakDownStep, ExclusiveTimesAddUpToTheSpan) {
  // A GEMM-path step (ns): the round kernel starts 2 ns before the norm ends (a dependent
  // launch) and owns only its 10 ns after; a 5 ns gap before the layer's GEMM and before
  // the results' copy are idle. Given out of order: sorting is the function's job.
  const StepTime t = break_down_step({
      kernel(kSampling, 200, 210),
      copy(0, 10),
      kernel("void flashserve::kernels::device::embedding_kernel(flashserve::kernels::"
             "EmbeddingParams)", 10, 20),
      kernel(kNorm, 20, 30),
      kernel(kRound, 28, 40),
      kernel(kQ4kGemm, 45, 100),
      kernel(kAttention, 100, 150),
      kernel(kNorm, 150, 160),
      kernel(kRound, 160, 165),
      kernel(kQ6kGemm, 165, 200),
      copy(215, 220),
  });
  EXPECT_NEAR(part_ns(t, Part::kCopy), 15, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kEmbedding), 10, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kNorm), 10, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kRoundActivations), 10, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kQuantGemm), 55, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kAttention), 50, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kLmHead), 10 + 5 + 35, 1e-6);  // final norm, round, GEMM
  EXPECT_NEAR(part_ns(t, Part::kSampling), 10, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kIdle), 10, 1e-6);
  EXPECT_NEAR(t.span * 1e9, 220, 1e-6);
  ASSERT_EQ(t.quant_gemm_by_format.size(), 1u);  // the LM head's Q6_K GEMM is not a layer's
  EXPECT_NEAR(t.quant_gemm_by_format.at("Q4_K") * 1e9, 55, 1e-6);
  EXPECT_EQ(t.num_kernels, 9);
  ASSERT_EQ(t.by_kernel.count("quant_gemm_kernel Q6_K [LM head]"), 1u);
  EXPECT_NEAR(t.by_kernel.at("quant_gemm_kernel Q6_K [LM head]").seconds * 1e9, 35, 1e-6);
  EXPECT_EQ(t.by_kernel.at("round_kernel").launches, 1);
  EXPECT_NEAR(t.by_kernel.at("round_kernel").seconds * 1e9, 10, 1e-6);
  EXPECT_NEAR(t.by_kernel.at("round_kernel [LM head]").seconds * 1e9, 5, 1e-6);
  // Embedding, norm, round, GEMM, attention, the head's norm, round and GEMM, sampling.
  EXPECT_EQ(t.by_kernel.size(), 9u);
}

TEST(BreakDownStep, GemvPathHeadIsTheLastKernelBeforeSampling) {
  // Fused GEMVs (no norm kernels): QKV, attention, O, gate/up, down, then norm + LM head.
  const StepTime t = break_down_step({
      kernel("void flashserve::kernels::device::embedding_kernel(x)", 0, 10),
      kernel(kGemv, 10, 20), kernel(kAttention, 20, 30), kernel(kGemv, 30, 40),
      kernel(kGemv, 40, 50), kernel(kGemv, 50, 60), kernel(kGemv, 60, 90),
      kernel(kSampling, 90, 95)});
  EXPECT_NEAR(part_ns(t, Part::kGemv), 40, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kLmHead), 30, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kEmbedding), 10, 1e-6);
  EXPECT_NEAR(part_ns(t, Part::kIdle), 0, 1e-6);
}

TEST(BreakDownStep, EmptyAndWindows) {
  EXPECT_EQ(break_down_step({}).num_kernels, 0);
  const std::vector<GpuActivity> all = {copy(0, 5), copy(10, 15), copy(20, 25)};
  EXPECT_EQ(activities_between(all, 10, 20).size(), 1u);
  EXPECT_EQ(activities_between(all, 0, 100).size(), 3u);
}

TEST(Tables, WallAndPartRows) {
  Results r;
  r.title = "m.gguf";
  r.device = "cuda";
  ModeRow& on = r.rows[64][0];
  on.wall = {0.0070, 0.0078, 0.0080};
  r.rows[64][1].wall = {0.0100};
  StepTime s;
  s.seconds[static_cast<int>(Part::kLmHead)] = 0.0005;
  s.quant_gemm_by_format["Q6_K"] = 0.001;
  s.seconds[static_cast<int>(Part::kQuantGemm)] = 0.001;
  s.span = 0.0015;
  s.num_kernels = 300;
  s.by_kernel["quant_gemm_kernel Q6_K"] = {0.001, 2};
  s.by_kernel["round_kernel"] = {0.002, 4};
  r.kernel_table_n = 64;
  on.traced.steps = {StepTime{}, s, s};  // the first (trace set-up) is left out of the means
  on.traced.wall = {0.1, 0.002, 0.002};
  on.traced.enqueue = {0.1, 0.0004, 0.0004};
  const std::string out = format_tables(r);
  EXPECT_NE(out.find("| 64 | 7.800 | 7.000-8.000 | 8205 | 10.000 | 10.000-10.000 | 2.200 |"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("| 64 | graphs on | 2.000 | 0.400 | 1.500 | 0.000 | 0.500 | 300 |"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("| final norm + LM head | 0.500 |"), std::string::npos) << out;
  EXPECT_NE(out.find("|   of which Q6_K | 1.000 |"), std::string::npos) << out;
  EXPECT_EQ(out.find("GPU time by part, graphs off"), std::string::npos) << out;
  // The kernel list: costliest first, per step.
  const size_t kernels = out.find("### Kernels at N=64, graphs on");
  ASSERT_NE(kernels, std::string::npos) << out;
  EXPECT_LT(out.find("| round_kernel | 4.0 | 2.000 |", kernels),
            out.find("| quant_gemm_kernel Q6_K | 2.0 | 1.000 |", kernels))
      << out;
  EXPECT_NE(out.find("| quant_gemm_kernel Q6_K | 2.0 | 1.000 |", kernels), std::string::npos);

  // The difference against a run whose graphs-on step is 5 ms and whose LM head is 0.2 ms.
  r.label = "weights native";
  Results b = r;
  b.label = "weights bf16";
  b.rows[64][0].wall = {0.005};
  b.rows[64][1].wall.clear();  // not measured: no difference shown as a number
  for (StepTime& t : b.rows[64][0].traced.steps) {
    t.seconds[static_cast<int>(Part::kLmHead)] = 0.0002;
  }
  const std::string diff = format_difference(r, b);
  EXPECT_NE(diff.find("### weights native minus weights bf16"), std::string::npos) << diff;
  EXPECT_NE(diff.find("| wall p50, graphs on | 2.800 |"), std::string::npos) << diff;
  EXPECT_NE(diff.find("| wall p50, graphs off | 0.000 |"), std::string::npos) << diff;
  EXPECT_NE(diff.find("| final norm + LM head | 0.300 |"), std::string::npos) << diff;
  EXPECT_NE(diff.find("| GPU span | 0.000 |"), std::string::npos) << diff;
}

}  // namespace
}  // namespace flashserve::bench
