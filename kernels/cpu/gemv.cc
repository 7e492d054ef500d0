#include "kernels/cpu/gemv.h"

#include <cmath>
#include <cstring>

#include "base/bf16.h"
#include "kernels/cpu/rmsnorm.h"

namespace flashserve::kernels {

std::vector<float> gemv_input_rows_cpu(const GemvCpuParams& p) {
  const int64_t k = p.k;
  std::vector<float> xs(static_cast<size_t>(p.m) * k);
  for (int r = 0; r < p.m; ++r) {
    const float* row = p.x + (p.rows != nullptr ? p.rows[r] : r) * k;
    float* dst = xs.data() + r * k;
    if (p.input == GemvInput::kRmsNorm) {
      rmsnorm_cpu(row, p.norm_weight, 1, p.k, p.eps, dst);
      for (int64_t i = 0; i < k; ++i) dst[i] = round_to_bf16(dst[i]);
    } else {
      std::memcpy(dst, row, k * sizeof(float));
    }
  }
  return xs;
}

void gemv_cpu(const GemvCpuParams& p) {
  const int64_t k = p.k;
  const std::vector<float> xs = gemv_input_rows_cpu(p);
  auto dot = [&](int r, int64_t col) {
    double acc = 0;
    for (int64_t i = 0; i < k; ++i) acc += double{xs[r * k + i]} * p.w[col * k + i];
    return static_cast<float>(acc);
  };
  for (int r = 0; r < p.m; ++r) {
    for (int j = 0; j < p.n; ++j) {
      float& y = p.y[static_cast<int64_t>(r) * p.n + j];
      switch (p.output) {
        case GemvOutput::kBf16:
        case GemvOutput::kRopeAppend:  // the bf16 QKV that RoPE then reads (rope_cpu)
          y = round_to_bf16(dot(r, j));
          break;
        case GemvOutput::kFp32: y = dot(r, j); break;
        case GemvOutput::kFp32Accumulate: y += dot(r, j); break;
        case GemvOutput::kSwiglu: {
          const float g = round_to_bf16(dot(r, j)), u = round_to_bf16(dot(r, p.n + j));
          y = round_to_bf16(g / (1.f + std::exp(-g)) * u);
          break;
        }
      }
    }
  }
}

}  // namespace flashserve::kernels
