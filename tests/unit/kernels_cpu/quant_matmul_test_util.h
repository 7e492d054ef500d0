#pragma once
// Shared by the quantized-product tests of this folder: odd shapes, random activations, one
// product on a chosen path.
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/quant_matmul.h"
#include "kernels/quant/quant_layout.h"

namespace flashserve::kernels::quant_matmul_test {

struct Shape {
  int m, n;
  int64_t k;
};

// Odd shapes: k of 1, 3, 5 or 18 units of 32 (K-quants: 1 to 3 super-blocks), n not a
// multiple of any tile width, m across the decode (m < 4) and prefill tiles.
inline std::vector<Shape> shapes(WeightFormat f) {
  const bool kquant = weight_block_elements(f) == 256;
  std::vector<int64_t> ks = kquant ? std::vector<int64_t>{256, 512, 768}
                                   : std::vector<int64_t>{32, 96, 160, 576};
  std::vector<Shape> out;
  for (int64_t k : ks) {
    for (int m : {1, 2, 3, 5, 37}) {
      for (int n : {1, 7, 13}) out.push_back({m, n, k});
    }
  }
  return out;
}

inline std::vector<float> random_activations(int m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (float& v : x) v = dist(rng);
  for (int64_t i = 0; i < k && i < 32; ++i) x[i] = 0.f;  // an all-zero unit (dx = 0)
  return x;
}

inline std::vector<float> run(CpuIsa isa, WeightFormat f, const std::vector<uint8_t>& w,
                       const Shape& s, const Q8Activations& x, const std::vector<float>& y0,
                       bool accumulate) {
  std::vector<float> y = y0;
  QuantMatmulParams p;
  p.format = f;
  p.w = w.data();
  p.k = s.k;
  p.n_begin = 0;
  p.n_end = s.n;
  p.x = &x;
  p.y = y.data();
  p.ldy = s.n;
  p.accumulate = accumulate;
  quant_matmul_cpu(isa, p);
  return y;
}

inline std::string name(WeightFormat f, const Shape& s) {
  return std::string(weight_format_name(f)) + " m=" + std::to_string(s.m) +
         " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k);
}

}  // namespace flashserve::kernels::quant_matmul_test
