// DequantAhead (model/cuda/dequant_ahead.h): the order of a step's native matrices, the
// scratch bytes two consecutive copies need (no GPU), and on a GPU that every acquire()
// hands back a complete, exact bf16 copy of its slot when the main stream reads it right
// after (the reads stand in for the GEMMs), with the next slot dequantized ahead at the
// other end of the scratch where the pair fits, on the main stream where it does not or
// when the slot is outside the order (the LM head), over two steps.
#include "model/cuda/dequant_ahead.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/bf16.h"
#include "kernels/cpu/quant.h"
#include "kernels/device.h"
#include "kernels/quant/quant_layout.h"
#include "tests/support/quant_blocks.h"

namespace flashserve::model::cuda {
namespace {

using kernels::WeightFormat;

// A [rows, k] matrix described (format and shape) without device data.
DeviceMatrix shape_only(WeightFormat f, int64_t rows, int64_t k) {
  DeviceMatrix m;
  m.format = f;
  m.rows = rows;
  m.k = k;
  return m;
}

// Two layers: layer 0 with a separate V (Q6_K beside Q4_K Q/K) and a bf16 gate/up (not in
// the order), layer 1 all native.
DeviceWeights two_layers() {
  DeviceWeights w;
  w.layers.resize(2);
  DeviceLayer& a = w.layers[0];
  a.wqkv = shape_only(WeightFormat::kQ4_K, 96, 512);
  a.wv = shape_only(WeightFormat::kQ6_K, 32, 512);
  a.wo = shape_only(WeightFormat::kQ8_0, 64, 512);
  a.w_gate_up = shape_only(WeightFormat::kBf16, 256, 512);
  a.w_down = shape_only(WeightFormat::kQ5_K, 64, 1024);
  DeviceLayer& b = w.layers[1];
  b.wqkv = shape_only(WeightFormat::kQ4_K, 128, 512);
  b.wo = shape_only(WeightFormat::kQ8_0, 64, 512);
  b.w_gate_up = shape_only(WeightFormat::kQ4_0, 256, 512);
  b.w_down = shape_only(WeightFormat::kQ4_1, 64, 1024);
  return w;
}

TEST(DequantAheadTest, OrderIsTheStepsNativeMatricesAndPairsCoverConsecutiveOnes) {
  const DeviceWeights w = two_layers();
  const DeviceLayer &a = w.layers[0], &b = w.layers[1];
  const std::vector<DequantSlot> want = {{&a.wqkv, &a.wv}, {&a.wo, nullptr},
                                         {&a.w_down, nullptr}, {&b.wqkv, nullptr},
                                         {&b.wo, nullptr}, {&b.w_gate_up, nullptr},
                                         {&b.w_down, nullptr}};
  EXPECT_EQ(dequant_order(w, 2), want);
  EXPECT_EQ(dequant_order(w, 1), std::vector<DequantSlot>(want.begin(), want.begin() + 3));
  EXPECT_EQ(want[0].bytes(), (96 + 32) * 512 * 2);
  // The largest consecutive pair: layer 1's gate/up and down, plus the top's alignment.
  EXPECT_EQ(dequant_pair_bytes(w), 256 * 512 * 2 + 64 * 1024 * 2 + 256);
  EXPECT_EQ(dequant_slot(b.wqkv, &b.wv), (DequantSlot{&b.wqkv, nullptr}));  // empty wv dropped
}

// Random ggml blocks of m's format uploaded into m's device layout; returns the bf16 bits
// of ggml's values (what dequantize_bf16 must write).
std::vector<uint16_t> upload_random(DeviceMatrix* m, std::mt19937& rng) {
  const std::vector<uint8_t> ggml = kernels::testing::random_ggml_tensor(m->format, m->rows, m->k, rng);
  std::vector<float> values(static_cast<size_t>(m->rows * m->k));
  EXPECT_TRUE(kernels::dequantize_ggml_cpu(m->format, ggml.data(), m->rows * m->k, values.data()).ok());
  const kernels::QuantLayout l = kernels::quant_layout(m->format, m->rows, m->k);
  std::vector<uint8_t> packed(static_cast<size_t>(l.total_bytes));
  EXPECT_TRUE(kernels::quant_repack(m->format, ggml.data(), static_cast<int64_t>(ggml.size()),
                                    m->rows, m->k, packed.data(), l.total_bytes)
                  .ok());
  EXPECT_TRUE(m->data.allocate(packed.size()).ok());
  EXPECT_EQ(cudaMemcpy(m->data.get(), packed.data(), packed.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<uint16_t> bits(values.size());
  for (size_t i = 0; i < values.size(); ++i) bits[i] = fp32_to_bf16_bits(values[i]);
  return bits;
}

TEST(DequantAheadTest, EveryAcquiredCopyIsCompleteAndExact) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  DeviceWeights w = two_layers();
  DeviceMatrix lm_head = shape_only(WeightFormat::kQ6_K, 300, 512);
  std::vector<DequantSlot> slots = dequant_order(w, 2);
  slots.push_back({&lm_head, nullptr});  // outside the order: on the main stream
  std::vector<std::vector<uint16_t>> want(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    for (const DeviceMatrix* part : {slots[i].w, slots[i].w2}) {
      if (part == nullptr) continue;
      const std::vector<uint16_t> bits = upload_random(const_cast<DeviceMatrix*>(part), rng);
      want[i].insert(want[i].end(), bits.begin(), bits.end());
    }
  }
  const int64_t lm_bytes = slots.back().bytes();
  struct Setup {
    const char* name;
    int64_t scratch_bytes;
    bool side_stream;
    bool alternates;  // every ordered slot after the first at the other end
  };
  const Setup setups[] = {
      {"pairs fit", std::max(dequant_pair_bytes(w), lm_bytes), true, true},
      {"some pairs do not fit", lm_bytes, true, false},
      {"no side stream", std::max(dequant_pair_bytes(w), lm_bytes), false, false},
  };
  cudaStream_t main = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking), cudaSuccess);
  for (const Setup& s : setups) {
    SCOPED_TRACE(s.name);
    DequantAhead ahead;
    if (s.side_stream) ASSERT_TRUE(ahead.init().ok());
    DeviceBuffer scratch;
    ASSERT_TRUE(scratch.allocate(static_cast<size_t>(s.scratch_bytes)).ok());
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE(ahead.begin_step(dequant_order(w, 2), main).ok());
      std::vector<DeviceBuffer> got(slots.size());
      std::vector<bool> at_bottom;
      for (size_t i = 0; i < slots.size(); ++i) {
        absl::StatusOr<void*> copy = ahead.acquire(slots[i], scratch, main);
        ASSERT_TRUE(copy.ok()) << copy.status();
        at_bottom.push_back(*copy == scratch.get());
        ASSERT_TRUE(got[i].allocate(static_cast<size_t>(slots[i].bytes())).ok());
        ASSERT_EQ(cudaMemcpyAsync(got[i].get(), *copy, slots[i].bytes(), cudaMemcpyDeviceToDevice, main),
                  cudaSuccess);
      }
      ASSERT_TRUE(ahead.join(main).ok());
      ASSERT_EQ(cudaStreamSynchronize(main), cudaSuccess);
      for (size_t i = 0; i < slots.size(); ++i) {
        std::vector<uint16_t> host(want[i].size());
        ASSERT_EQ(cudaMemcpy(host.data(), got[i].get(), host.size() * 2, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        EXPECT_EQ(std::memcmp(host.data(), want[i].data(), host.size() * 2), 0)
            << "step " << step << " slot " << i;
      }
      EXPECT_TRUE(at_bottom.back()) << "the LM head runs on the main stream, at the bottom";
      for (size_t i = 0; i + 1 < slots.size(); ++i) {
        if (s.alternates) {
          EXPECT_EQ(at_bottom[i], i % 2 == 0) << "slot " << i;
        } else if (!s.side_stream) {
          EXPECT_TRUE(at_bottom[i]) << "slot " << i;
        }
      }
    }
  }
  cudaStreamDestroy(main);
}

}  // namespace
}  // namespace flashserve::model::cuda
