// Which matrices a step with prefills dequantizes ahead, in what order, and the two slots'
// sizes (model/cuda/dequant_prefetch.h): the plan on the 8B's and the 1B's Q4_K_M shapes.
// No GPU needed: the matrices are shapes without device memory.
#include "model/cuda/dequant_prefetch.h"

#include <gtest/gtest.h>

#include <vector>

namespace flashserve::model::cuda {
namespace {

using kernels::WeightFormat;

constexpr int kCrossover = 512;  // kernels::quant_gemm_max_tokens() on the H200

void shape(DeviceMatrix& m, WeightFormat f, int64_t rows, int64_t k) {
  m.format = f;
  m.rows = rows;
  m.k = k;
}

// Llama 3.1 8B as Q4_K_M stores it: [wq; wk] Q4_K with wv Q6_K beside it in layers with
// `v6`, ffn_down Q6_K where `d6`.
std::vector<DeviceLayer> llama8b(const std::vector<bool>& v6, const std::vector<bool>& d6) {
  std::vector<DeviceLayer> layers(v6.size());
  for (size_t i = 0; i < layers.size(); ++i) {
    DeviceLayer& l = layers[i];
    if (v6[i]) {
      shape(l.wqkv, WeightFormat::kQ4_K, 5120, 4096);
      shape(l.wv, WeightFormat::kQ6_K, 1024, 4096);
    } else {
      shape(l.wqkv, WeightFormat::kQ4_K, 6144, 4096);
    }
    shape(l.wo, WeightFormat::kQ4_K, 4096, 4096);
    shape(l.w_gate_up, WeightFormat::kQ4_K, 28672, 4096);
    shape(l.w_down, d6[i] ? WeightFormat::kQ6_K : WeightFormat::kQ4_K, 4096, 14336);
  }
  return layers;
}

TEST(DequantPrefetch, Every8BMatrixInTheOrderOfItsGemms) {
  const std::vector<DeviceLayer> layers = llama8b({true, false}, {true, false});
  const DequantPrefetchPlan plan = plan_dequant_prefetch(layers, 2, 2048, kCrossover);
  ASSERT_EQ(plan.entries.size(), 8u);
  const DeviceMatrix* order[8] = {&layers[0].wqkv, &layers[0].wo, &layers[0].w_gate_up,
                                  &layers[0].w_down, &layers[1].wqkv, &layers[1].wo,
                                  &layers[1].w_gate_up, &layers[1].w_down};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(plan.entries[i].a, order[i]) << i;
  EXPECT_EQ(plan.entries[0].b, &layers[0].wv);  // wv beside [wq; wk], one GEMM
  EXPECT_EQ(plan.entries[0].elements, 6144 * 4096);
  EXPECT_EQ(plan.entries[4].b, nullptr);  // [wq; wk; wv] in one format
  // Even entries (qkv, gate_up) share slot 0, odd ones (o, down) slot 1.
  EXPECT_EQ(plan.slot_elements[0], 28672 * 4096);
  EXPECT_EQ(plan.slot_elements[1], 4096 * 14336);
  EXPECT_EQ(dequant_prefetch_elements(layers, kCrossover), 28672 * 4096 + 4096 * 14336);
  // num_layers bounds the pass.
  EXPECT_EQ(plan_dequant_prefetch(layers, 1, 2048, kCrossover).entries.size(), 4u);
}

TEST(DequantPrefetch, NothingUpToTheCrossover) {
  const std::vector<DeviceLayer> layers = llama8b({true}, {false});
  for (int m : {1, 16, 64, 256, 512}) {
    EXPECT_TRUE(plan_dequant_prefetch(layers, 1, m, kCrossover).entries.empty()) << m;
  }
  EXPECT_EQ(plan_dequant_prefetch(layers, 1, 513, kCrossover).entries.size(), 4u);
}

TEST(DequantPrefetch, GroupedAndBf16MatricesAreLeftOut) {
  // Llama 3.2 1B: qkv (3072 x 2048) and o (2048 x 2048) are small: the layer's group.
  std::vector<DeviceLayer> layers(2);
  for (DeviceLayer& l : layers) {
    shape(l.wqkv, WeightFormat::kQ4_K, 3072, 2048);
    shape(l.wo, WeightFormat::kQ4_K, 2048, 2048);
    shape(l.w_gate_up, WeightFormat::kQ4_K, 16384, 2048);
    shape(l.w_down, WeightFormat::kQ6_K, 2048, 8192);
  }
  layers[1].w_down.format = WeightFormat::kBf16;  // a type without a native kernel
  const DequantPrefetchPlan plan = plan_dequant_prefetch(layers, 2, 1024, kCrossover);
  ASSERT_EQ(plan.entries.size(), 3u);
  EXPECT_EQ(plan.entries[0].a, &layers[0].w_gate_up);
  EXPECT_EQ(plan.entries[1].a, &layers[0].w_down);
  EXPECT_EQ(plan.entries[2].a, &layers[1].w_gate_up);
  EXPECT_EQ(plan.slot_elements[0], 16384 * 2048);
  EXPECT_EQ(plan.slot_elements[1], 2048 * 8192);
}

TEST(DequantPrefetch, SlotsRoundUpTo128Elements) {
  std::vector<DeviceLayer> layers(1);
  shape(layers[0].wqkv, WeightFormat::kQ8_0, 2500, 4096);  // 10.24 M: not small
  const DequantPrefetchPlan plan = plan_dequant_prefetch(layers, 1, 1024, kCrossover);
  ASSERT_EQ(plan.entries.size(), 1u);
  EXPECT_EQ(plan.entries[0].elements, 2500 * 4096);
  EXPECT_EQ(plan.slot_elements[0], (2500 * 4096 + 127) / 128 * 128);
  EXPECT_EQ(plan.slot_elements[1], 0);
}

}  // namespace
}  // namespace flashserve::model::cuda
