#pragma once
// fp32 RMSNorm of the Llama family: y = x / sqrt(mean(x^2) + eps) * weight, row by row.
#include <cstdint>

namespace flashserve::kernels {

// x:      [num_rows, dim]
// weight: [dim]
// out:    [num_rows, dim]; may alias x (in place).
// The sum of squares is accumulated in double (dim is at most a few thousand, and the
// norm of a row is the one place where fp32 summation error would enter every element);
// the scale 1/sqrt(mean + eps) is rounded to float once, then y = (x * scale) * weight.
// REQUIRES: dim >= 1, eps >= 0.
void rmsnorm_cpu(const float* x, const float* weight, int64_t num_rows, int dim, float eps,
                 float* out);

}  // namespace flashserve::kernels
