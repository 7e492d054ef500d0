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

}  // namespace flashserve::kernels
