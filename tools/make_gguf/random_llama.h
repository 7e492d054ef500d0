#pragma once
// A Llama-architecture GGUF with random weights of any shape and tensor type, carrying the
// tokenizer (every `tokenizer.*` key, chat template included) of another GGUF: benchmark
// models made where they run (the GPU machine takes at most 64 MiB per call; an 8B-shaped
// Q4_1 file is ~4.5 GB). The file is streamed tensor by tensor (the next tensor is made while
// one is written: two in memory at most); each tensor's values are generated and quantized
// by all threads in fixed chunks of rows, each chunk seeded from (seed, tensor, chunk), so
// the bytes depend on the seed and shape only, never on the thread count.
//
// Values: projections and embeddings ~ N(0, 0.02^2) (the initializer range of Llama's
// training configs), RMSNorm weights 1 + N(0, 0.02^2). With these, activations behave like
// a real model's: RMSNorm brings every layer's input back to unit scale, each projection
// output has std 0.02 * sqrt(fan_in) (1.3 at hidden 4096), and the residual stream grows
// only additively, so 32 layers stay finite in fp16/bf16. The normals are Irwin-Hall sums
// of four 16-bit uniforms (bounded at +-3.46 sigma; one 64-bit draw per value).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gguf/ggml_type.h"
#include "tools/make_gguf/tensor_types.h"

namespace flashserve::tools {

struct LlamaShape {
  int num_layers = 0;
  int hidden_size = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int ffn_size = 0;
  int context_length = 0;
  float rope_theta = 10000.f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = true;  // no output.weight: the LM head is token_embd
  // general.architecture: llama, mistral (the llama layout), qwen2 (+ Q/K/V biases ~
  // N(0, 0.5^2), large like Qwen's), qwen3 (+ per-head Q/K RMSNorm weights 1 + N(0, 0.02^2)),
  // gemma3 (qwen3's Q/K norms + post_attention_norm and post_ffw_norm; norm weights are
  // written as llama.cpp's converter writes Gemma's, 1 + w), phi3 (attn_qkv = [Q; K; V] and
  // ffn_up = [gate; up] fused, as llama.cpp's converter writes Phi-3).
  std::string architecture = "llama";
  int head_dim = 0;  // 0: hidden_size / num_heads; else written as attention.key_length
  // Llama 3 RoPE scaling (`rope_freqs.weight`, as llama.cpp's converter writes it from
  // rope_scaling {rope_type: llama3, factor, low_freq_factor 1, high_freq_factor 4,
  // original_max_position_embeddings 8192}); 0: none.
  float llama3_rope_factor = 0;
  int sliding_window = 0;        // attention.sliding_window (gemma3, phi3); 0: none
  float rope_linear_factor = 0;  // rope.scaling.type linear with this factor; 0: none

  int resolved_head_dim() const { return head_dim > 0 ? head_dim : hidden_size / num_heads; }
};

// The architectures write_random_llama writes.
std::vector<std::string> random_architectures();

// Llama 3's RoPE frequency factors [head_dim / 2] (the divisors of each pair's frequency).
std::vector<float> llama3_rope_factors(int head_dim, float rope_theta, float factor);

// The presets' names, in the order --help lists them.
std::vector<std::string> llama_preset_names();
// InvalidArgument naming the preset and listing the known ones when `name` is unknown.
absl::StatusOr<LlamaShape> llama_preset(std::string_view name);

// OK, or InvalidArgument naming the flag (--layers, --hidden, ...) and value at fault:
// non-positive sizes, heads not a multiple of kv heads, hidden not a multiple of heads
// (without --head-dim), an odd head_dim (RoPE rotates pairs), rows that are not whole
// blocks of `type` (a type without a row fallback, see tensor_types.h: the K-quants and
// IQ4_XS fall back), an unknown --arch.
absl::Status validate_shape(const LlamaShape& shape, model::GgmlType type);

struct RandomLlamaOptions {
  std::string tokenizer_from;   // GGUF whose tokenizer.* keys are copied
  std::string out;              // the file written
  std::string name;             // general.name
  LlamaShape shape;
  model::GgmlType weight_type = model::GgmlType::kQ4_1;  // 2-D weights (kPure); norms stay F32
  QuantMix mix = QuantMix::kPure;  // or a llama.cpp preset's per-tensor mixture (--ftype)
  uint64_t seed = 0;
  int num_threads = 0;          // 0: every hardware thread
  bool vocab_only = false;      // only general.* and tokenizer.* keys, no tensors
};

struct RandomLlamaSummary {
  int vocab_size = 0;
  int64_t num_parameters = 0;
  int num_tensors = 0;
  uint64_t file_bytes = 0;
};

// Writes the file (via `out + ".part"`, renamed at the end). Errors name the problem:
// InvalidArgument for a bad shape or a --tokenizer-from file that is not a GGUF with a
// tokenizer we load (the message starts with "--tokenizer-from <path>: "), the system's
// error for I/O failures.
absl::StatusOr<RandomLlamaSummary> write_random_llama(const RandomLlamaOptions& options);

}  // namespace flashserve::tools
