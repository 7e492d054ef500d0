#include "kernels/cpu/rmsnorm.h"

#include <cmath>

namespace flashserve::kernels {

void rmsnorm_cpu(const float* x, const float* weight, int64_t num_rows, int dim, float eps,
                 float* out) {
  for (int64_t r = 0; r < num_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = out + r * dim;
    double sum_sq = 0.0;
    for (int c = 0; c < dim; ++c) sum_sq += static_cast<double>(xr[c]) * xr[c];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum_sq / dim + eps));
    for (int c = 0; c < dim; ++c) yr[c] = (xr[c] * scale) * weight[c];
  }
}

}  // namespace flashserve::kernels
