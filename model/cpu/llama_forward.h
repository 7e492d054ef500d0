#pragma once
// The fp32 CPU forward pass of a Llama-family decoder over one flat (packed) batch.
//
// Per layer: RMSNorm -> Q/K/V projections -> RoPE (adjacent pairs, llama.cpp "normal" mode,
// since GGUF stores Q/K rows permuted for it) -> append K/V to the paged cache -> attention
// (kernels::attention_tiled_cpu: causal, GQA, scale 1/sqrt(head_dim)) -> O projection ->
// residual -> RMSNorm -> gate/up -> SwiGLU -> down -> residual. Then the final RMSNorm and
// the LM head for the last token of each sequence only. The architectures' differences
// (model/config.h) are data: Q/K/V biases and Q/K norms; Gemma's embedding scale, post-norms
// (the O and down outputs normalized before the residual add), GeGLU and local layers (a
// sliding window and their own RoPE table).
//
// All tokens of the batch go through each projection together; attention runs per run of
// same-phase sequences (prefill: > 1 query token, decode: exactly 1) so that its time can be
// reported per phase. Every row of every product is independent of the other rows, so a
// sequence's logits are bitwise the same alone or in any batch: quantized matrices by
// construction (kernels/cpu/quant_matmul.h: one order of operations per output on every
// path); fp32 matrices through OpenBLAS with GEMMs padded to a minimum row count so that the
// BLAS computes each row the same way for every batch size (where its kernels allow:
// tests/unit/model_forward checks it).
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/cpu/quant_matmul.h"
#include "model/config.h"
#include "model/cpu/cpu_weights.h"
#include "model/runner.h"

namespace flashserve::model {

class ThreadPool;

// fp32 paged KV cache, one K and one V tensor per layer, each
// [num_blocks, num_kv_heads, block_size, head_dim] (kernels/paged_kv.h). Zeroed memory from
// the OS, touched only where sequences write: an unused cache takes no resident memory.
class PagedKvCache {
 public:
  PagedKvCache(int num_layers, int num_blocks, int num_kv_heads, int block_size,
               int head_dim);
  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  float* k(int layer) { return k_.get() + layer * layer_stride_; }  // one layer's K
  float* v(int layer) { return v_.get() + layer * layer_stride_; }  // one layer's V
  // Bytes per block over all layers, K and V (to size a cache from a memory budget).
  static int64_t bytes_per_block(int num_layers, int num_kv_heads, int block_size,
                                 int head_dim);

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  int num_blocks_;
  int block_size_;
  int64_t layer_stride_;
  std::unique_ptr<float[], Free> k_;
  std::unique_ptr<float[], Free> v_;
};

// Scratch buffers of one step, grown on demand and reused so that steady-state decode
// allocates nothing. Each holds at least the GEMM padding rows of llama_forward.cc (a few
// rows beyond the batch, so that small batches take the same BLAS path as large ones).
struct ForwardWorkspace {
  std::vector<float> x;       // [num_tokens, hidden_size] residual stream
  std::vector<float> xn;      // [num_tokens, hidden_size] normalized input of a sublayer
  std::vector<float> q;       // [num_tokens, num_heads, head_dim]
  std::vector<float> k;       // [num_tokens, num_kv_heads, head_dim]
  std::vector<float> v;       // [num_tokens, num_kv_heads, head_dim]
  std::vector<float> attn;    // [num_tokens, num_heads, head_dim]
  std::vector<float> gate;    // [num_tokens, ffn_size]
  std::vector<float> up;      // [num_tokens, ffn_size]
  std::vector<float> rope_cos;  // [num_tokens, head_dim / 2]
  std::vector<float> rope_sin;  // [num_tokens, head_dim / 2]
  std::vector<float> rope_cos_local;  // the local layers' (config.layer_is_local), or empty
  std::vector<float> rope_sin_local;
  std::vector<float> last;    // [num_seqs, hidden_size] last token of each sequence
  std::vector<float> logits;  // [num_seqs, vocab_size]
  std::vector<int32_t> run_cu_seqlens;  // cu_seqlens_q of one attention run, rebased to 0
  kernels::Q8Activations q8;  // the input of the quantized products, quantized
  ThreadPool* pool = nullptr;  // runs the products (set by the runner; never null)
  kernels::CpuIsa isa = kernels::CpuIsa::kScalar;  // of the quantized products
  double gemm_seconds = 0;  // time in GEMMs during the current forward pass
};

// Runs the first `num_layers` layers of the model over `batch` (all of them normally; fewer
// for LogitsRunner::forward_logits' layer-by-layer comparison), then the final norm and the LM
// head, writing logits [num_seqs, vocab_size] (resized).
// REQUIRES: `batch` passed validate_forward_batch (model/batch_validation.h) for this
// config and cache; 1 <= num_layers <= config.num_layers.
// `stats` may be null; when set, the attention time, bytes and FLOPs, the GEMM time and the
// rest of the forward pass's time are added to it.
void llama_forward_cpu(const ModelConfig& config, const CpuWeights& weights,
                       const ForwardBatch& batch, int num_layers, PagedKvCache* cache,
                       ForwardWorkspace* ws, std::vector<float>* logits,
                       ForwardStats* stats);

// Samples the next token of every sequence in batch.sample_seqs from `logits`
// ([num_seqs, vocab_size], rows modified in place) with the CPU reference of the sampling
// kernel (kernels/cpu/sampling.h); sampled is resized to sample_seqs.size().
void sample_cpu(const ModelConfig& config, const ForwardBatch& batch,
                std::vector<float>* logits, std::vector<SampledToken>* sampled);

}  // namespace flashserve::model
