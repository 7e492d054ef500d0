#pragma once
// The weights of a Llama-family decoder, dequantized to fp32 once at load.
//
// Every projection matrix keeps GGUF's storage order: a GGUF weight with ggml dims
// [in, out] (dims[0] fastest) is the row-major matrix [out][in], so y = x W^T is one
// sgemm with W transposed (`cblas_sgemm(RowMajor, NoTrans, Trans, ...)`).
//
// Q and K rows are in adjacent-pair RoPE order: llama.cpp's converter permutes the rows of
// each llama head so that RoPE rotates ADJACENT pairs (x[2i], x[2i+1]) ("normal" mode), and
// files whose rows are in HF order (config.neox_rows: qwen2, qwen3, gemma3, phi3, which rotate
// (x[i], x[i + head_dim/2]), llama.cpp's NEOX mode) are permuted here the same way, with
// their Q/K biases and Q/K norm weights. Both forward passes therefore apply adjacent-pair
// RoPE only, whatever the architecture.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/config.h"

namespace flashserve::model {

class GgufFile;

struct LayerWeights {
  std::vector<float> attn_norm;  // [hidden_size]
  std::vector<float> wq;         // [num_heads * head_dim, hidden_size]
  std::vector<float> wk;         // [num_kv_heads * head_dim, hidden_size]
  std::vector<float> wv;         // [num_kv_heads * head_dim, hidden_size]
  std::vector<float> bq, bk, bv;  // [num_heads * head_dim], [kv_dim], [kv_dim]; config.qkv_bias
  std::vector<float> q_norm, k_norm;  // [head_dim] each; config.qk_norm
  std::vector<float> wo;         // [hidden_size, num_heads * head_dim]
  std::vector<float> ffn_norm;   // [hidden_size]
  std::vector<float> w_gate;     // [ffn_size, hidden_size]
  std::vector<float> w_up;       // [ffn_size, hidden_size]
  std::vector<float> w_down;     // [hidden_size, ffn_size]
  std::vector<float> attn_post_norm, ffn_post_norm;  // [hidden_size] each; config.post_norms
};

struct LlamaWeights {
  std::vector<float> token_embd;   // [vocab_size, hidden_size]
  std::vector<LayerWeights> layers;  // [num_layers]
  std::vector<float> output_norm;  // [hidden_size]
  std::vector<float> output;       // [vocab_size, hidden_size]; empty when tied

  // The LM head: `output`, or `token_embd` when the embeddings are tied.
  const float* lm_head() const { return output.empty() ? token_embd.data() : output.data(); }
  // Total fp32 parameters held (for logging).
  int64_t num_parameters() const;
};

// Checks, before anything is read or sized, that the file holds exactly the tensors the
// config needs (`token_embd.weight`, `blk.<i>.{attn_norm,attn_q,attn_k,attn_v,attn_output,
// ffn_norm,ffn_gate,ffn_up,ffn_down}.weight`, the architecture's biases, Q/K norms and
// post-norms (`post_attention_norm`, `post_ffw_norm`), phi3's fused `attn_qkv` and
// [gate; up] `ffn_up` in place of attn_q/k/v and ffn_gate/up,
// `output_norm.weight`, `output.weight` unless tied, `rope_freqs.weight` if present) with
// the dims the config implies and a type flashserve can decode. Errors: NotFound naming a
// missing tensor; InvalidArgument naming a tensor whose dims differ (expected and actual);
// Unimplemented naming a tensor whose type cannot be decoded, or a tensor the architecture
// does not use (refused rather than silently ignored).
absl::Status validate_model_tensors(const GgufFile& file, const ModelConfig& config);

// Loads and dequantizes every tensor the config needs, with the errors above.
absl::StatusOr<LlamaWeights> load_llama_weights(const GgufFile& file,
                                                const ModelConfig& config);

// The pieces of load_llama_weights, for backends that convert the weights one layer at a time
// (the CUDA backend never holds the whole fp32 model):
// InvalidArgument naming the sizes when a hyper-parameter the weights need is <= 0.
absl::Status check_llama_config(const ModelConfig& config);
// One layer's tensors (`blk.<layer>.*`), dequantized into `w`, with the errors above. A
// tensor whose full name `skip` (may be empty) answers true for is not read and its members
// are left empty: a backend that keeps that matrix in the file's block format needs no fp32
// copy of it (dequantizing an 8B model's matrices on one core took most of a CUDA server's
// ~55 s start). `w`'s vectors' memory is reused where a member already holds the tensor's
// size: a loop over the layers that passes one LayerWeights allocates and first-touches each
// member's pages once, not once a layer (an 8B model's fp32 layers are ~28 GB of fresh pages,
// ~12 s of page faults on one core). Members the config does not use are not touched; on an
// error `w` holds a partial layer.
absl::Status load_llama_layer(const GgufFile& file, const ModelConfig& config, int layer,
                              const std::function<bool(std::string_view name)>& skip,
                              LayerWeights* w);
// Rows of every head reordered from HF's half-split RoPE order to adjacent pairs: row i and
// row i + head_dim/2 of a head become rows 2i and 2i+1 (what llama.cpp's converter does to
// llama files). `data` is num_bytes / row_bytes rows of row_bytes bytes (fp32 values or
// ggml blocks alike), a whole number of heads of head_dim rows.
void permute_rows_to_adjacent_pairs(int head_dim, int64_t row_bytes, uint8_t* data,
                                    int64_t num_bytes);
// Tensor `name` dequantized to fp32; NotFound when missing, InvalidArgument when its ggml
// dims are not exactly `dims`.
absl::StatusOr<std::vector<float>> load_weight_tensor(const GgufFile& file,
                                                      const std::string& name,
                                                      const std::vector<int64_t>& dims);
// The same into `out` (GgufFile::dequantize_into: its memory reused when the size matches).
absl::Status load_weight_tensor_into(const GgufFile& file, const std::string& name,
                                     const std::vector<int64_t>& dims, std::vector<float>* out);

}  // namespace flashserve::model
