#pragma once
// fp32 CPU attention over the paged KV cache (kernels/paged_kv.h): the reference every CUDA
// attention kernel is checked against, and the attention of the CPU backend.
//
// Two implementations of the same function:
//  - attention_naive_cpu: materializes each query row's full score vector, softmax, then PV.
//  - attention_tiled_cpu: the FlashAttention algorithm: K/V in tiles of kv_tile keys, online
//    softmax with a running max m and sum l per query row, rescaling the accumulated output
//    by exp(m_old - m_new) at every max update. It is what the CUDA kernels implement.
#include <cstdint>

namespace flashserve::kernels {

struct AttentionCpuParams {
  const float* q = nullptr;            // [num_tokens, num_heads, head_dim], packed by sequence
  const float* k_cache = nullptr;      // [num_blocks, num_kv_heads, block_size, head_dim]
  const float* v_cache = nullptr;      // [num_blocks, num_kv_heads, block_size, head_dim]
  float* out = nullptr;                // [num_tokens, num_heads, head_dim]
  float* lse = nullptr;                // [num_tokens, num_heads] natural-log LSE, or nullptr
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1] prefix sums of query lengths
  const int32_t* seqlens_k = nullptr;     // [num_seqs] K/V length, including this step's tokens
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  int num_seqs = 0;
  int num_heads = 0;     // query heads; a multiple of num_kv_heads (GQA/MQA)
  int num_kv_heads = 0;  // query head h reads KV head h / (num_heads / num_kv_heads)
  int head_dim = 0;
  int block_size = 0;
  int max_blocks_per_seq = 0;
  float softmax_scale = 0.f;  // usually 1/sqrt(head_dim)
  // Query i (0-based) of sequence s sits at position seqlens_k[s] - q_len(s) + i and, when
  // causal, sees keys at positions <= its own. Without causal it sees all seqlens_k[s] keys.
  bool causal = true;
  // Sliding window (local attention): with W = sliding_window > 0, the query at position p
  // sees only keys k with p - k < W, i.e. the last W positions up to and including its own
  // (k > p - W); W <= 0 means no window. This is the rule of HF transformers
  // (huggingface/transformers:src/transformers/masking_utils.py, sliding_window_overlay:
  // kv_idx > q_idx - sliding_window) and of llama.cpp (ggml-org/llama.cpp:src/llama-hparams.cpp,
  // is_masked_swa, LLAMA_SWA_TYPE_STANDARD: masked when p1 - p0 >= n_swa) for Gemma 2/3 and
  // Mistral. REQUIRES causal when W > 0 (the window is one-sided: keys after the query are
  // the causal mask's business).
  int sliding_window = 0;
};

// REQUIRES: q_len(s) <= seqlens_k[s]; every block the sequences touch is in block_tables;
// num_heads % num_kv_heads == 0. Writes every row of out (and lse) of the packed queries; a
// row that sees no key (seqlens_k[s] == 0) gets out = 0 and lse = -inf. Masked keys are
// skipped, never scored as -inf, so no NaN arises from masking.
// attention_tiled_cpu splits large problems into work items (sequence, KV head, 32-query
// chunk) claimed by num_threads tasks of `pool` (e.g. the CPU runner's persistent pool), or
// without a pool by std::thread workers, one per hardware thread; small ones such as decode
// run on the calling thread. Results do not depend on the number of threads. kv_tile >= 1
// is the number of keys per K/V tile; it need not divide block_size.
struct AttentionPool {
  // Calls task(task_ctx, i) for i in [0, num_tasks), possibly on several threads, and
  // returns when all have returned.
  void (*run)(void* ctx, int num_tasks, void (*task)(void* task_ctx, int i), void* task_ctx) =
      nullptr;
  void* ctx = nullptr;
  int num_threads = 1;
};
void attention_naive_cpu(const AttentionCpuParams& p);
void attention_tiled_cpu(const AttentionCpuParams& p, int kv_tile = 64,
                         const AttentionPool* pool = nullptr);

// Writes new_k/new_v rows into the cache at slot_mapping[t] (kernels/paged_kv.h); a
// negative slot marks a padding token and is skipped.
//   new_k, new_v: [num_tokens, num_kv_heads, head_dim]
void kv_append_cpu(const float* new_k, const float* new_v, const int32_t* slot_mapping,
                   int num_tokens, int num_kv_heads, int head_dim, int block_size,
                   float* k_cache, float* v_cache);

}  // namespace flashserve::kernels
