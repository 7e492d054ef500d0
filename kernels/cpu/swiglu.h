#pragma once
// The gated activations of the MLP, fp32: SwiGLU (Llama, Qwen: out = silu(gate) * up with
// silu(g) = g / (1 + exp(-g))) and GeGLU with the tanh GELU (Gemma: gelu_tanh(gate) * up).
#include <cstdint>

namespace flashserve::kernels {

// gate, up, out: [num_rows, ffn_size]; out may alias gate or up (element-wise).
// Large negative g makes exp(-g) overflow to +inf and silu(g) = g / inf = -0, its limit;
// no NaN for finite inputs.
void swiglu_cpu(const float* gate, const float* up, int64_t num_rows, int ffn_size, float* out);

// out = gelu_tanh(gate) * up, gelu_tanh(g) = 0.5 g (1 + tanh(z)), z = sqrt(2 / pi) (g + 0.044715
// g^3) (HF's gelu_pytorch_tanh, ggml's gelu), computed as g / (1 + exp(-2 z)): the same value
// without 1 + tanh(z)'s cancellation for negative g. Same shapes, aliasing and limits as
// swiglu_cpu (large negative g gives -0).
void geglu_tanh_cpu(const float* gate, const float* up, int64_t num_rows, int ffn_size,
                    float* out);

}  // namespace flashserve::kernels
