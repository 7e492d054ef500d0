#include "kernels/cpu/swiglu.h"

#include <cmath>

namespace flashserve::kernels {

void swiglu_cpu(const float* gate, const float* up, int64_t num_rows, int ffn_size, float* out) {
  const int64_t n = num_rows * ffn_size;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.f + std::exp(-g)) * up[i];
  }
}

void geglu_tanh_cpu(const float* gate, const float* up, int64_t num_rows, int ffn_size,
                    float* out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const int64_t n = num_rows * ffn_size;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float z = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = g / (1.f + std::exp(-2.f * z)) * up[i];
  }
}

}  // namespace flashserve::kernels
