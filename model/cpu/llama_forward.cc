#include "model/cpu/llama_forward.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/attention/attention.h"
#include "kernels/cpu/attention_ref.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/paged_kv.h"
#include "model/cpu/thread_pool.h"

namespace flashserve::model {
namespace {

// Batch invariance. OpenBLAS (0.3.x with its SkylakeX/Cooperlake kernels, what this
// machine runs) computes sgemm calls with M*N*K up to about 1e6 in a "small matrix" kernel
// whose summation order differs from the blocked kernel's, so a decode token alone (M = 1)
// would get different bits than the same token in a batch. Above that size every row comes
// out bitwise the same whatever M is and wherever the row sits (measured for M up to 300).
// So each GEMM runs on at least gemm_rows() rows, the extra rows being zeros whose results
// are ignored; tests/unit/model_forward checks the invariance on the real model. (OpenBLAS
// 0.3.27+ also forwards M = 1 calls to sgemv; the LM head of a large vocabulary runs at
// M = num_seqs unpadded, so with such a BLAS that test is the one that would notice.)
// Cost: ~10-15 % of a decode step on this machine (blocked sgemm at M ~ 4-10 vs the small
// kernel at M = 1), for bitwise-identical results alone and in any batch.
constexpr int64_t kSmallGemmMnk = int64_t{1} << 20;

int gemm_rows(int m, int n, int k) {
  return std::max<int64_t>(m, kSmallGemmMnk / (static_cast<int64_t>(n) * k) + 1);
}

// Rows every activation buffer needs beyond the batch's tokens for the padding above.
int min_gemm_rows(const ModelConfig& c) {
  const int q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  return std::max({gemm_rows(1, q_dim, c.hidden_size), gemm_rows(1, kv_dim, c.hidden_size),
                   gemm_rows(1, c.hidden_size, q_dim), gemm_rows(1, c.ffn_size, c.hidden_size),
                   gemm_rows(1, c.hidden_size, c.ffn_size),
                   gemm_rows(1, c.vocab_size, c.hidden_size)});
}

// The input of one or more products: fp32 rows [m, k], quantized (ws->q8) by the first
// product with a quantized matrix and reused by the next ones over the same input.
struct LinearInput {
  const float* x;
  int m;
  int64_t k;
  bool quantized = false;
};

// Quantizes in->x into ws->q8 over the pool (rows are independent: any split gives the
// same bits).
void quantize_input(LinearInput* in, ForwardWorkspace* ws) {
  kernels::resize_activations_q8(in->m, in->k, &ws->q8);
  const int num_tasks = std::min(in->m, ws->pool->num_threads());
  ws->pool->run(num_tasks, [&](int t) {
    kernels::quantize_activation_rows_q8(ws->isa, in->x, in->m * t / num_tasks,
                                         in->m * (t + 1) / num_tasks, &ws->q8);
  });
  in->quantized = true;
}

// y[m, n] = x[m, k] * w[n, k]^T + beta * y, beta 0 or 1. Quantized matrices run the
// quantized products (kernels/cpu/quant_matmul.h) over the pool, split by output columns
// (every output is computed the same way whatever the split); fp32 ones one sgemm.
// Adds its wall time to ws->gemm_seconds.
// REQUIRES (fp32): x and y have gemm_rows(m, n, k) rows, those past m finite (they are
// computed and ignored).
void linear(LinearInput* in, const CpuMatrix& w, float* y, float beta, ForwardWorkspace* ws) {
  const auto start = std::chrono::steady_clock::now();
  const int n = static_cast<int>(w.rows), k = static_cast<int>(w.cols);
  if (w.quantized()) {
    if (!in->quantized) quantize_input(in, ws);
    // Chunks of whole tiles (4 weight rows), a few per thread so that a busy core does less.
    const int per_thread = in->m >= 4 ? 8 : 3;  // prefill: finer, for a busy machine
    const int num_tasks = std::max(1, std::min(ws->pool->num_threads() * per_thread, n / 16));
    ws->pool->run(num_tasks, [&](int t) {
      kernels::QuantMatmulParams p;
      p.format = w.format;
      p.w = w.blocks;
      p.k = k;
      p.n_begin = n / 4 * t / num_tasks * 4;
      p.n_end = t + 1 == num_tasks ? n : n / 4 * (t + 1) / num_tasks * 4;
      p.x = &ws->q8;
      p.y = y;
      p.ldy = n;
      p.accumulate = beta != 0.0f;
      kernels::quant_matmul_cpu(ws->isa, p);
    });
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, gemm_rows(in->m, n, k), n, k, 1.0f,
                in->x, k, w.f32, k, beta, y, n);
  }
  ws->gemm_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <typename T>
T* sized(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Runs attention for sequences [s0, s1) (one phase) and accounts it in `phase`.
void attention_run(const ModelConfig& c, const ForwardBatch& b, int s0, int s1,
                   const float* k_cache, const float* v_cache, int block_size, int window,
                   ForwardWorkspace* ws, AttentionPhaseStats* phase) {
  const int t0 = b.cu_seqlens_q[s0];
  const int64_t q_row = static_cast<int64_t>(c.num_heads) * c.head_dim;
  int32_t* cu = sized(ws->run_cu_seqlens, s1 - s0 + 1);
  for (int s = s0; s <= s1; ++s) cu[s - s0] = b.cu_seqlens_q[s] - t0;

  kernels::AttentionCpuParams p;
  p.q = ws->q.data() + t0 * q_row;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.out = ws->attn.data() + t0 * q_row;
  p.cu_seqlens_q = cu;
  p.seqlens_k = b.seqlens_k.data() + s0;
  p.block_tables = b.block_tables.data() + static_cast<int64_t>(s0) * b.max_blocks_per_seq;
  p.num_seqs = s1 - s0;
  p.num_heads = c.num_heads;
  p.num_kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.block_size = block_size;
  p.max_blocks_per_seq = b.max_blocks_per_seq;
  p.softmax_scale = c.softmax_scale();
  p.causal = true;
  p.sliding_window = window;

  kernels::AttentionPool pool;  // the runner's persistent pool, not threads per call
  pool.ctx = ws->pool;
  pool.num_threads = ws->pool->num_threads();
  pool.run = [](void* ctx, int num_tasks, void (*task)(void*, int), void* task_ctx) {
    static_cast<ThreadPool*>(ctx)->run(num_tasks, [&](int i) { task(task_ctx, i); });
  };
  const auto start = std::chrono::steady_clock::now();
  kernels::attention_tiled_cpu(p, 64, &pool);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (phase == nullptr) return;
  const kernels::AttentionCost cost =
      kernels::attention_cost(cu, p.seqlens_k, p.num_seqs, c.num_heads, c.num_kv_heads,
                              c.head_dim, sizeof(float), p.causal);
  phase->seconds += elapsed.count();
  phase->bytes += cost.bytes;
  phase->flops += cost.flops;
  phase->calls += 1;
}

// Attention over the whole batch, one call per maximal run of same-phase sequences.
void attention_all(const ModelConfig& c, const ForwardBatch& b, PagedKvCache* cache,
                   int layer, ForwardWorkspace* ws, ForwardStats* stats) {
  auto is_prefill = [&b](int s) { return b.cu_seqlens_q[s + 1] - b.cu_seqlens_q[s] > 1; };
  const int num_seqs = b.num_seqs();
  for (int s0 = 0; s0 < num_seqs;) {
    int s1 = s0 + 1;
    while (s1 < num_seqs && is_prefill(s1) == is_prefill(s0)) ++s1;
    AttentionPhaseStats* phase = nullptr;
    if (stats != nullptr) phase = is_prefill(s0) ? &stats->prefill : &stats->decode;
    attention_run(c, b, s0, s1, cache->k(layer), cache->v(layer), cache->block_size(),
                  c.layer_is_local(layer) ? c.sliding_window : 0, ws, phase);
    s0 = s1;
  }
}

// x[r, j] += bias[j] for r in [0, rows): x is [rows, dim].
void add_bias(const float* bias, int rows, int dim, float* x) {
  for (int r = 0; r < rows; ++r) {
    for (int j = 0; j < dim; ++j) x[static_cast<int64_t>(r) * dim + j] += bias[j];
  }
}

// x += in . w^T (the O or down projection into the residual stream); with post-norms
// (config.post_norms) x += RMSNorm(in . w^T) * post_norm, the product going through xn,
// which the sublayer no longer needs.
void residual_add(const ModelConfig& c, LinearInput* in, const CpuMatrix& w,
                  const float* post_norm, int t, ForwardWorkspace* ws) {
  if (!c.post_norms) {
    linear(in, w, ws->x.data(), 1.0f, ws);
    return;
  }
  float* out = ws->xn.data();
  linear(in, w, out, 0.0f, ws);
  kernels::rmsnorm_cpu(out, post_norm, t, c.hidden_size, c.rms_eps, out);
  const int64_t n = int64_t{t} * c.hidden_size;
  float* x = ws->x.data();
  for (int64_t i = 0; i < n; ++i) x[i] += out[i];
}

void attention_block(const ModelConfig& c, const CpuLayerWeights& w, const ForwardBatch& b,
                     PagedKvCache* cache, int layer, ForwardWorkspace* ws,
                     ForwardStats* stats) {
  const int t = b.num_tokens();
  const int hidden = c.hidden_size;
  const int q_dim = c.num_heads * c.head_dim;
  const int kv_dim = c.num_kv_heads * c.head_dim;
  kernels::rmsnorm_cpu(ws->x.data(), w.attn_norm, t, hidden, c.rms_eps, ws->xn.data());
  LinearInput xn{ws->xn.data(), t, hidden};
  linear(&xn, w.wq, ws->q.data(), 0.0f, ws);
  linear(&xn, w.wk, ws->k.data(), 0.0f, ws);
  linear(&xn, w.wv, ws->v.data(), 0.0f, ws);
  if (c.qkv_bias) {
    add_bias(w.bq, t, q_dim, ws->q.data());
    add_bias(w.bk, t, kv_dim, ws->k.data());
    add_bias(w.bv, t, kv_dim, ws->v.data());
  }
  if (c.qk_norm) {  // per head, over head_dim: each head is one row of the norm
    kernels::rmsnorm_cpu(ws->q.data(), w.q_norm, int64_t{t} * c.num_heads, c.head_dim,
                         c.rms_eps, ws->q.data());
    kernels::rmsnorm_cpu(ws->k.data(), w.k_norm, int64_t{t} * c.num_kv_heads, c.head_dim,
                         c.rms_eps, ws->k.data());
  }
  const auto style = kernels::RopeStyle::kAdjacentPairs;  // every file's rows (weights.h)
  const bool local = c.layer_is_local(layer);
  const float* cos = local ? ws->rope_cos_local.data() : ws->rope_cos.data();
  const float* sin = local ? ws->rope_sin_local.data() : ws->rope_sin.data();
  kernels::rope_apply_cpu(ws->q.data(), t, c.num_heads, c.head_dim, cos, sin, style);
  kernels::rope_apply_cpu(ws->k.data(), t, c.num_kv_heads, c.head_dim, cos, sin, style);
  kernels::kv_append_cpu(ws->k.data(), ws->v.data(), b.slot_mapping.data(), t,
                         c.num_kv_heads, c.head_dim, cache->block_size(), cache->k(layer),
                         cache->v(layer));
  attention_all(c, b, cache, layer, ws, stats);
  LinearInput attn{ws->attn.data(), t, q_dim};
  residual_add(c, &attn, w.wo, w.attn_post_norm, t, ws);
}

void ffn_block(const ModelConfig& c, const CpuLayerWeights& w, int t, ForwardWorkspace* ws) {
  const int hidden = c.hidden_size;
  const int ffn = c.ffn_size;
  kernels::rmsnorm_cpu(ws->x.data(), w.ffn_norm, t, hidden, c.rms_eps, ws->xn.data());
  LinearInput xn{ws->xn.data(), t, hidden};
  linear(&xn, w.w_gate, ws->gate.data(), 0.0f, ws);
  linear(&xn, w.w_up, ws->up.data(), 0.0f, ws);
  const int num_tasks = std::min(t, ws->pool->num_threads());
  const auto activation = c.gelu_ffn ? kernels::geglu_tanh_cpu : kernels::swiglu_cpu;
  ws->pool->run(num_tasks, [&](int task) {  // rows are independent
    const int64_t r0 = int64_t{t} * task / num_tasks, r1 = int64_t{t} * (task + 1) / num_tasks;
    activation(ws->gate.data() + r0 * ffn, ws->up.data() + r0 * ffn, r1 - r0, ffn,
               ws->gate.data() + r0 * ffn);
  });
  LinearInput gate{ws->gate.data(), t, ffn};
  residual_add(c, &gate, w.w_down, w.ffn_post_norm, t, ws);
}

// Sizes the buffers for the step and zeroes the GEMM padding rows of every GEMM input
// (rows [num_tokens, rows) of x, xn, attn, gate and [num_seqs, rows) of last), so that the
// padding stays zero through the layers (only finite values matter; zero is simplest).
void prepare_workspace(const ModelConfig& c, int num_tokens, int num_seqs,
                       ForwardWorkspace* ws) {
  const size_t pad = min_gemm_rows(c);
  const size_t t = num_tokens, rows = std::max(t, pad);
  const size_t seq_rows = std::max<size_t>(num_seqs, pad);
  auto zero_tail = [](std::vector<float>& v, size_t from, size_t to, size_t width) {
    float* data = sized(v, to * width);
    std::fill(data + from * width, data + to * width, 0.0f);
  };
  zero_tail(ws->x, t, rows, c.hidden_size);
  zero_tail(ws->xn, t, rows, c.hidden_size);
  zero_tail(ws->attn, t, rows, static_cast<size_t>(c.num_heads) * c.head_dim);
  zero_tail(ws->gate, t, rows, c.ffn_size);
  zero_tail(ws->last, num_seqs, seq_rows, c.hidden_size);
  sized(ws->q, rows * c.num_heads * c.head_dim);
  sized(ws->k, rows * c.num_kv_heads * c.head_dim);
  sized(ws->v, rows * c.num_kv_heads * c.head_dim);
  sized(ws->up, rows * c.ffn_size);
  sized(ws->logits, seq_rows * c.vocab_size);
  sized(ws->rope_cos, t * c.head_dim / 2);
  sized(ws->rope_sin, t * c.head_dim / 2);
  if (c.sliding_window > 0) {
    sized(ws->rope_cos_local, t * c.head_dim / 2);
    sized(ws->rope_sin_local, t * c.head_dim / 2);
  }
}

}  // namespace

PagedKvCache::PagedKvCache(int num_layers, int num_blocks, int num_kv_heads, int block_size,
                           int head_dim)
    : num_blocks_(num_blocks),
      block_size_(block_size),
      layer_stride_(static_cast<int64_t>(num_blocks) * num_kv_heads * block_size * head_dim),
      k_(static_cast<float*>(std::calloc(static_cast<size_t>(layer_stride_) * num_layers + 1,
                                         sizeof(float)))),
      v_(static_cast<float*>(std::calloc(static_cast<size_t>(layer_stride_) * num_layers + 1,
                                         sizeof(float)))) {
  if (k_ == nullptr || v_ == nullptr) throw std::bad_alloc();  // as std::vector did
}

int64_t PagedKvCache::bytes_per_block(int num_layers, int num_kv_heads, int block_size,
                                      int head_dim) {
  return 2 * static_cast<int64_t>(num_layers) * num_kv_heads * block_size * head_dim *
         static_cast<int64_t>(sizeof(float));
}

void llama_forward_cpu(const ModelConfig& c, const CpuWeights& weights,
                       const ForwardBatch& b, int num_layers, PagedKvCache* cache,
                       ForwardWorkspace* ws, std::vector<float>* logits, ForwardStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  const int t = b.num_tokens();
  const int num_seqs = b.num_seqs();
  const size_t hidden = c.hidden_size;
  prepare_workspace(c, t, num_seqs, ws);
  ws->gemm_seconds = 0;
  const double attention_before =
      stats != nullptr ? stats->prefill.seconds + stats->decode.seconds : 0.0;
  kernels::rope_cos_sin_cpu(b.positions.data(), t, c.head_dim, c.rope_theta,
                            ws->rope_cos.data(), ws->rope_sin.data(),
                            c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data());
  if (c.sliding_window > 0) {  // local layers: their own base, no scaling
    kernels::rope_cos_sin_cpu(b.positions.data(), t, c.head_dim, c.rope_theta_local,
                              ws->rope_cos_local.data(), ws->rope_sin_local.data(), nullptr);
  }
  for (int i = 0; i < t; ++i) {
    float* row = ws->x.data() + i * hidden;
    weights.token_embd.row_to_float(b.token_ids[i], row);
    if (c.embedding_scale != 1.f) {
      for (size_t j = 0; j < hidden; ++j) row[j] *= c.embedding_scale;
    }
  }
  for (int layer = 0; layer < num_layers; ++layer) {
    attention_block(c, weights.layers[layer], b, cache, layer, ws, stats);
    ffn_block(c, weights.layers[layer], t, ws);
  }
  for (int s = 0; s < num_seqs; ++s) {
    const int last_token = b.cu_seqlens_q[s + 1] - 1;
    std::memcpy(ws->last.data() + s * hidden, ws->x.data() + last_token * hidden,
                hidden * sizeof(float));
  }
  kernels::rmsnorm_cpu(ws->last.data(), weights.output_norm, num_seqs, c.hidden_size,
                       c.rms_eps, ws->last.data());
  LinearInput last{ws->last.data(), num_seqs, c.hidden_size};
  linear(&last, weights.lm_head, ws->logits.data(), 0.0f, ws);
  logits->assign(ws->logits.begin(),
                 ws->logits.begin() + static_cast<size_t>(num_seqs) * c.vocab_size);
  if (stats != nullptr) {
    // other = the whole pass less GEMMs and attention (this pass's share of stats).
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double attention = stats->prefill.seconds + stats->decode.seconds - attention_before;
    stats->breakdown.measured = true;
    stats->breakdown.attention_seconds += attention;
    stats->breakdown.gemm_seconds += ws->gemm_seconds;
    stats->breakdown.other_seconds += std::max(0.0, total - ws->gemm_seconds - attention);
  }
}

void sample_cpu(const ModelConfig& c, const ForwardBatch& b, std::vector<float>* logits,
                std::vector<SampledToken>* sampled) {
  sampled->resize(b.sample_seqs.size());
  for (size_t i = 0; i < b.sample_seqs.size(); ++i) {
    float* row = logits->data() + static_cast<size_t>(b.sample_seqs[i]) * c.vocab_size;
    const kernels::SampleResult r = kernels::sample_row_cpu(
        row, c.vocab_size, b.sample_specs[i], b.penalty_tokens.data(), b.penalty_counts.data());
    (*sampled)[i] = to_sampled_token(r, b.sample_specs[i], c.vocab_size);
  }
}

}  // namespace flashserve::model
