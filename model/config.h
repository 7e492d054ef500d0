#pragma once
// Hyper-parameters of a Llama-family decoder, read from GGUF metadata (`<arch>.*` keys), and
// the architecture's forward-pass differences as data (docs/design.md):
// both backends read these fields once; neither compares architecture names.
//
// Architectures (llama.cpp's converter decides how a file stores them):
//   llama, mistral  Q/K rows permuted for adjacent-pair RoPE (model/weights.h); optional
//                   Llama 3 RoPE frequency factors (`rope_freqs.weight`)
//   qwen2           Q/K/V biases; Q/K rows in HF order (NEOX RoPE): permuted at load
//   qwen3           per-head RMSNorm of Q and K (`attn_q_norm`, `attn_k_norm`, [head_dim])
//                   before RoPE; Q/K rows in HF order: permuted at load
//   gemma3          Q/K norms as qwen3; the embedding scaled by sqrt(hidden_size); RMSNorm
//                   of the attention and FFN outputs before each residual add
//                   (`post_attention_norm`, `post_ffw_norm`); GeGLU with tanh GELU; five
//                   of every six layers local (a sliding window, RoPE base 10,000, no
//                   scaling), the sixth global (the file's base and linear scaling), as
//                   llama.cpp and HF transformers run them. The file's norm weights already
//                   hold Gemma's 1 + w (llama.cpp's converter adds the 1).
//   phi3            Q, K and V rows in one tensor (`attn_qkv`), the gate's and the up
//                   projection's in one (`ffn_up`: gate rows first), split at load; Q/K rows
//                   in HF order: permuted at load; the file's sliding window on every layer
//                   (HF's Phi3 applies it; llama.cpp ignores it, see docs/models.md)
// Anything else a file asks for (soft-capping, experts, partial rotary, RoPE scaling other
// than linear / Llama 3 factors, Phi-3's LongRoPE factor tensors, a sliding window outside
// gemma3 and phi3) is refused by name at load.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flashserve::model {

class GgufFile;

struct ModelConfig {
  std::string architecture;     // general.architecture, e.g. "llama"
  std::string name;             // general.name (informational)
  int num_layers = 0;           // <arch>.block_count
  int hidden_size = 0;          // <arch>.embedding_length
  int num_heads = 0;            // <arch>.attention.head_count
  int num_kv_heads = 0;         // <arch>.attention.head_count_kv (defaults to num_heads)
  int head_dim = 0;             // hidden_size / num_heads (or <arch>.attention.key_length)
  int ffn_size = 0;             // <arch>.feed_forward_length
  int vocab_size = 0;           // rows of token_embd.weight
  int context_length = 0;       // <arch>.context_length
  float rope_theta = 10000.f;   // <arch>.rope.freq_base
  float rms_eps = 1e-5f;        // <arch>.attention.layer_norm_rms_epsilon
  bool tied_embeddings = false; // true when output.weight is absent (LM head = token_embd)

  // The architecture's differences from llama (resolved from general.architecture):
  bool qkv_bias = false;         // Q/K/V projections add a bias (attn_{q,k,v}.bias)
  bool qk_norm = false;          // per-head RMSNorm of Q and K before RoPE (weight [head_dim])
  bool neox_rows = false;        // the file's Q/K rows rotate (i, i + head_dim/2) pairs; the
                                 // loader permutes them to adjacent pairs (model/weights.h)
  bool fused_projections = false;  // attn_qkv = [Q; K; V] rows, ffn_up = [gate; up] (phi3)
  // RoPE frequency divisors [head_dim / 2]: angle_i = pos * theta^(-2i/d) / factor_i. Empty
  // when none (no scaling). From `rope_freqs.weight` (Llama 3) or a linear scaling factor.
  // Global layers only where some layers are local (below).
  std::vector<float> rope_freq_factors;
  bool rope_freqs_tensor = false;  // the factors are the file's `rope_freqs.weight`
  float embedding_scale = 1.f;   // token embeddings are multiplied by it (gemma3: sqrt(hidden))
  bool post_norms = false;       // RMSNorm of attention and FFN outputs before the residual
  bool gelu_ffn = false;         // GeGLU: gelu_tanh(gate) * up, instead of SwiGLU
  float attention_scale = 0.f;   // softmax scale; 0: 1 / sqrt(head_dim)
  // Local (sliding-window) layers: each query sees the last `sliding_window` keys, itself
  // included (keys k > p - W; kernels/cpu/attention_ref.h). 0: none. With a pattern P > 0,
  // layer i is global when (i + 1) % P == 0 and local otherwise; local layers use RoPE base
  // rope_theta_local without scaling.
  int sliding_window = 0;        // <arch>.attention.sliding_window
  int sliding_window_pattern = 0;
  float rope_theta_local = 10000.f;

  bool layer_is_local(int layer) const {
    return sliding_window > 0 &&
           (sliding_window_pattern <= 0 || (layer + 1) % sliding_window_pattern != 0);
  }
  // The attention softmax scale.
  float softmax_scale() const;
};

// The architectures config_from_gguf accepts, for messages: "llama, mistral, qwen2, qwen3, gemma3,
// phi3".
std::string supported_architectures();

// Reads and validates the config; errors name the missing/invalid key. Unimplemented naming
// the architecture, key or tensor for anything the forward passes do not implement.
absl::StatusOr<ModelConfig> config_from_gguf(const GgufFile& file);

}  // namespace flashserve::model
