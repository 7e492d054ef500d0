#pragma once
// fp32 SwiGLU of the Llama MLP: out = silu(gate) * up with silu(g) = g / (1 + exp(-g)).
#include <cstdint>

namespace flashserve::kernels {

// gate, up, out: [num_rows, ffn_size]; out may alias gate or up (element-wise).
// Large negative g makes exp(-g) overflow to +inf and silu(g) = g / inf = -0, its limit;
// no NaN for finite inputs.
void swiglu_cpu(const float* gate, const float* up, int64_t num_rows, int ffn_size, float* out);

}  // namespace flashserve::kernels
