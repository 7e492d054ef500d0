#pragma once
// Hyper-parameters of a Llama-family decoder, read from GGUF metadata (`<arch>.*` keys).
#include <cstdint>
#include <string>

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
};

// Reads and validates the config; errors name the missing/invalid key.
absl::StatusOr<ModelConfig> config_from_gguf(const GgufFile& file);

}  // namespace flashserve::model
