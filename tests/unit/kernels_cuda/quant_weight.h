#pragma once
// A random quantized weight for the GPU tests of kernels/quant/: ggml's bytes (for the fp32
// references of kernels/cpu/quant.h), their dequantization and the repacked device copy.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/quant.h"
#include "kernels/quant/quant_layout.h"
#include "tests/support/quant_blocks.h"
#include "tests/unit/kernels_cuda/attention_problem.h"

namespace flashserve::kernels::testing {

struct QuantWeight {
  std::vector<uint8_t> ggml;
  std::vector<float> values;  // ggml's dequantization, [rows, k]
  DeviceBuffer device;
};

// A random [rows, k] weight of format f (every quant bit random, random scales:
// tests/support/quant_blocks.h).
inline QuantWeight make_weight(WeightFormat f, int rows, int k, std::mt19937& rng) {
  QuantWeight w;
  w.ggml = random_ggml_tensor(f, rows, k, rng);
  w.values.resize(static_cast<size_t>(rows) * k);
  EXPECT_TRUE(dequantize_ggml_cpu(f, w.ggml.data(), int64_t{rows} * k, w.values.data()).ok());
  std::vector<uint8_t> packed(static_cast<size_t>(quant_layout(f, rows, k).total_bytes));
  EXPECT_TRUE(quant_repack(f, w.ggml.data(), static_cast<int64_t>(w.ggml.size()), rows, k,
                           packed.data(), static_cast<int64_t>(packed.size()))
                  .ok());
  w.device = DeviceBuffer::from(packed);
  return w;
}

}  // namespace flashserve::kernels::testing
