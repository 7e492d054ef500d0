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
// Anything else a file asks for (sliding windows, soft-capping, experts, partial rotary,
// RoPE scaling other than linear / Llama 3 factors) is refused by name at load.
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
  // RoPE frequency divisors [head_dim / 2]: angle_i = pos * theta^(-2i/d) / factor_i. Empty
  // when none (no scaling). From `rope_freqs.weight` (Llama 3) or a linear scaling factor.
  std::vector<float> rope_freq_factors;
};

// The architectures config_from_gguf accepts, for messages: "llama, mistral, qwen2, qwen3".
std::string supported_architectures();

// Reads and validates the config; errors name the missing/invalid key. Unimplemented naming
// the architecture, key or tensor for anything the forward passes do not implement.
absl::StatusOr<ModelConfig> config_from_gguf(const GgufFile& file);

}  // namespace flashserve::model
