#pragma once
// fp32 rotary position embedding (RoPE), applied in place to the query and key heads.
//
// Pairs and frequencies. Dimension pair i (0 <= i < head_dim / 2) of a head at position pos
// is rotated by the angle pos * theta_base^(-2i / head_dim):
//     (a, b) -> (a cos - b sin, a sin + b cos).
// Which two elements form pair i depends on how the Q/K projection rows are ordered:
//  - RopeStyle::kAdjacentPairs: (x[2i], x[2i+1]). This is llama.cpp's "normal" rope mode
//    (LLAMA_ROPE_TYPE_NORM, used for LLM_ARCH_LLAMA) and what GGUF llama files need: the
//    llama.cpp converter permutes each head's Q/K weight rows from HF's order
//    (reshape(n_head, 2, head_dim/2) -> swap the last two axes), so HF row i and row
//    i + head_dim/2 become rows 2i and 2i+1. HF transformers, loading such a GGUF, undoes it
//    (reverse_permute_weights, LlamaTensorProcessor in
//    huggingface/transformers:src/transformers/modeling_gguf_pytorch_utils.py) and then
//    applies its half-split rotate_half RoPE, which is the same computation.
//  - RopeStyle::kHalfSplit: (x[i], x[i + head_dim/2]), HF's rotate_half / llama.cpp's NEOX
//    mode, for architectures whose GGUF rows are not permuted (e.g. qwen2).
// The tests check that kAdjacentPairs on permuted rows equals kHalfSplit on HF rows.
//
// Accuracy. Angles, cos and sin are computed in double and rounded to float once, so the
// rotation is accurate at every position (a float angle pos * inv_freq would already be off
// by ~1e-4 rad at position 2000).
#include <cstdint>

namespace flashserve::kernels {

enum class RopeStyle {
  kAdjacentPairs,  // (x[2i], x[2i+1]): GGUF llama (llama.cpp LLAMA_ROPE_TYPE_NORM)
  kHalfSplit,      // (x[i], x[i + head_dim/2]): HF rotate_half, llama.cpp NEOX
};

// cos, sin: [num_tokens, head_dim / 2], filled for positions [num_tokens]. Compute once per
// step and reuse for every layer with rope_apply_cpu.
// freq_factors: null, or [head_dim / 2] divisors of pair i's frequency (Llama 3's
// rope_freqs, llama.cpp's ggml_rope_ext freq_factors): angle = pos * theta^(-2i/d) / f_i.
// REQUIRES: head_dim even, theta_base > 0, freq_factors (when set) > 0.
void rope_cos_sin_cpu(const int32_t* positions, int num_tokens, int head_dim, float theta_base,
                      float* cos, float* sin, const float* freq_factors = nullptr);

// x: [num_tokens, num_heads, head_dim], rotated in place with the table above.
void rope_apply_cpu(float* x, int num_tokens, int num_heads, int head_dim, const float* cos,
                    const float* sin, RopeStyle style);

// Convenience: table + rotation of q and k.
//   q: [num_tokens, num_heads, head_dim]   k: [num_tokens, num_kv_heads, head_dim]
//   positions: [num_tokens]
void rope_cpu(float* q, float* k, const int32_t* positions, int num_tokens, int num_heads,
              int num_kv_heads, int head_dim, float theta_base,
              RopeStyle style = RopeStyle::kAdjacentPairs);

}  // namespace flashserve::kernels
