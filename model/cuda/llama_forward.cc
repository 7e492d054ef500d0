#include "model/cuda/llama_forward.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "kernels/attention/attention.h"
#include "kernels/cpu/rope.h"
#include "kernels/gemv.h"
#include "kernels/quant/quant_gemm.h"
#include "kernels/quant/quant_gemv.h"
#include "kernels/layers.h"
#include "base/status_macros.h"
#include "kernels/cuda_check.h"
#include "model/cuda/dequant_group.h"
#include "model/cuda/native_gemm_path.h"

namespace flashserve::model::cuda {
namespace {

constexpr kernels::DType kAct = kernels::DType::kBf16;  // activations, weights and KV cache
constexpr size_t kBf16Bytes = 2;
constexpr size_t kAlign = 16;  // every array of the metadata block starts 16-byte aligned

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

bool is_prefill(const ForwardBatch& b, int s) { return b.cu_seqlens_q[s + 1] - b.cu_seqlens_q[s] > 1; }

// Runs of same-phase sequences (as in the CPU forward's attention_all) with their rebased
// cu_seqlens_q appended to *run_cu.
std::vector<AttentionRun> plan_runs(const ModelConfig& c, const ForwardBatch& b,
                                    std::vector<int32_t>* run_cu) {
  std::vector<AttentionRun> runs;
  for (int s0 = 0; s0 < b.num_seqs();) {
    int s1 = s0 + 1;
    while (s1 < b.num_seqs() && is_prefill(b, s1) == is_prefill(b, s0)) ++s1;
    AttentionRun r;
    r.s0 = s0;
    r.s1 = s1;
    r.t0 = b.cu_seqlens_q[s0];
    r.prefill = is_prefill(b, s0);
    r.cu_offset = static_cast<int>(run_cu->size());
    for (int s = s0; s <= s1; ++s) run_cu->push_back(b.cu_seqlens_q[s] - r.t0);
    for (int s = s0; s < s1; ++s) {
      r.max_seqlen_q = std::max(r.max_seqlen_q, b.cu_seqlens_q[s + 1] - b.cu_seqlens_q[s]);
      r.max_seqlen_k = std::max(r.max_seqlen_k, b.seqlens_k[s]);
    }
    const kernels::AttentionCost cost = kernels::attention_cost(
        run_cu->data() + r.cu_offset, b.seqlens_k.data() + s0, s1 - s0, c.num_heads,
        c.num_kv_heads, c.head_dim, kBf16Bytes, /*causal=*/true);
    r.flops = cost.flops;
    r.bytes = cost.bytes;
    runs.push_back(r);
    s0 = s1;
  }
  return runs;
}

kernels::AttentionParams attention_params(const ForwardContext& ctx, const DeviceBatch& b,
                                          const AttentionRun& r, int layer,
                                          bool round_q8_out = false) {
  const ModelConfig& c = *ctx.config;
  const int64_t q_row = static_cast<int64_t>(c.num_heads) * c.head_dim;
  kernels::AttentionParams p;
  p.dtype = kAct;
  p.q = ctx.ws->q.get<uint16_t>() + r.t0 * q_row;
  p.k_cache = ctx.cache->k_layer(layer);
  p.v_cache = ctx.cache->v_layer(layer);
  p.out = ctx.ws->attn.get<uint16_t>() + r.t0 * q_row;
  p.cu_seqlens_q = b.run_cu_seqlens + r.cu_offset;
  p.seqlens_k = b.seqlens_k + r.s0;
  p.block_tables = b.block_tables + static_cast<int64_t>(r.s0) * b.max_blocks_per_seq;
  p.num_seqs = r.s1 - r.s0;
  p.max_seqlen_q = r.max_seqlen_q;
  p.max_seqlen_k = r.max_seqlen_k;
  p.num_heads = c.num_heads;
  p.num_kv_heads = c.num_kv_heads;
  p.head_dim = c.head_dim;
  p.block_size = ctx.cache->block_size;
  p.max_blocks_per_seq = b.max_blocks_per_seq;
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  p.causal = true;
  p.round_q8_out = round_q8_out;
  return p;
}

// The step buffers' sizes for `t` tokens and `rows` output rows, in DeviceWorkspace order.
struct TokenBufferSizes {
  size_t x, xn, qkv, q, attn, gate_up, ffn, last, logits, results;
  size_t total() const { return x + xn + qkv + q + attn + gate_up + ffn + last + logits + results; }
};

TokenBufferSizes token_buffer_sizes(const ModelConfig& c, size_t t, size_t rows) {
  const size_t q_dim = static_cast<size_t>(c.num_heads) * c.head_dim;
  const size_t qkv_dim = static_cast<size_t>(c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  return {t * c.hidden_size * sizeof(float), t * c.hidden_size * kBf16Bytes,
          t * qkv_dim * kBf16Bytes,          t * q_dim * kBf16Bytes,
          t * q_dim * kBf16Bytes,            t * 2 * c.ffn_size * kBf16Bytes,
          t * c.ffn_size * kBf16Bytes,       rows * c.hidden_size * kBf16Bytes,
          rows * c.vocab_size * sizeof(float), rows * sizeof(kernels::SampleResult)};
}

// Grows the step buffers to `t` tokens and `rows` output rows.
absl::Status reserve_token_buffers(const ForwardContext& ctx, size_t t, size_t rows) {
  DeviceWorkspace& ws = *ctx.ws;
  const TokenBufferSizes z = token_buffer_sizes(*ctx.config, t, rows);
  RETURN_IF_ERROR(ws.x.reserve(z.x));
  RETURN_IF_ERROR(ws.xn.reserve(z.xn));
  RETURN_IF_ERROR(ws.qkv.reserve(z.qkv));
  RETURN_IF_ERROR(ws.q.reserve(z.q));
  RETURN_IF_ERROR(ws.attn.reserve(z.attn));
  RETURN_IF_ERROR(ws.gate_up.reserve(z.gate_up));
  RETURN_IF_ERROR(ws.ffn.reserve(z.ffn));
  RETURN_IF_ERROR(ws.last.reserve(z.last));
  RETURN_IF_ERROR(ws.logits.reserve(z.logits));
  return ws.results.reserve(z.results);
}

// Split-KV partials of a decode over `num_seqs` sequences in `num_splits` splits.
size_t decode_scratch_bytes(const ModelConfig& c, int num_seqs, int num_splits) {
  kernels::AttentionParams p;
  p.num_seqs = num_seqs;
  p.num_heads = c.num_heads;
  p.head_dim = c.head_dim;
  return kernels::attention_decode_workspace_bytes(p, num_splits);
}

// RoPE table bytes (cos and sin, fp32) for positions [0, num_positions).
size_t rope_table_bytes(const ModelConfig& c, int64_t num_positions) {
  return 2 * static_cast<size_t>(num_positions) * (c.head_dim / 2) * sizeof(float);
}

// Grows the step's device buffers to what `b` needs.
absl::Status reserve_workspace(const ForwardContext& ctx, const DeviceBatch& b) {
  DeviceWorkspace& ws = *ctx.ws;
  RETURN_IF_ERROR(reserve_token_buffers(ctx, b.num_tokens, std::max(b.num_out_rows, 1)));
  RETURN_IF_ERROR(
      ws.penalty_scratch.reserve(std::max(b.num_penalties, 1) * sizeof(float)));
  size_t decode_bytes = 0;
  for (const AttentionRun& r : b.runs) {
    if (r.prefill) continue;
    const kernels::AttentionParams p = attention_params(ctx, b, r, 0);
    decode_bytes = std::max(
        decode_bytes, kernels::attention_decode_workspace_bytes(p, attention_decode_splits(ctx, r)));
  }
  return ws.decode_scratch.reserve(std::max<size_t>(decode_bytes, 1));
}

// The RoPE tables cover positions [0, num_rope_positions); rebuilt larger when a batch
// reaches past them (values from kernels/cpu/rope.h, identical to the CPU backend's).
absl::Status reserve_rope_tables(const ForwardContext& ctx, int max_position) {
  DeviceWorkspace& ws = *ctx.ws;
  if (max_position < ws.num_rope_positions) return absl::OkStatus();
  const ModelConfig& c = *ctx.config;
  const int n = std::max(c.context_length, 2 * (max_position + 1));
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  const size_t half = c.head_dim / 2;
  std::vector<float> cos(n * half), sin(n * half);
  static_assert(sizeof(float) * 2 == 8);  // rope_table_bytes counts cos and sin in fp32
  kernels::rope_cos_sin_cpu(positions.data(), n, c.head_dim, c.rope_theta, cos.data(), sin.data(),
                            c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data());
  CUDA_CHECK(cudaStreamSynchronize(ctx.stream));  // old tables may be in use
  RETURN_IF_ERROR(ws.rope_cos.allocate(cos.size() * sizeof(float)));
  RETURN_IF_ERROR(ws.rope_sin.allocate(sin.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(ws.rope_cos.get(), cos.data(), cos.size() * sizeof(float),
                                     cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(ws.rope_sin.get(), sin.data(), sin.size() * sizeof(float),
                                     cudaMemcpyHostToDevice));
  ws.num_rope_positions = n;
  return absl::OkStatus();
}

// Packs host arrays into one block (each 16-byte aligned) and returns their offsets, in
// `bytes` (emptied first, its capacity reused).
class MetadataPacker {
 public:
  explicit MetadataPacker(std::vector<char>* bytes) : bytes_(*bytes) { bytes_.clear(); }
  template <typename T>
  size_t add(const T* data, size_t count) {
    const size_t offset = bytes_.size();
    bytes_.resize(offset + aligned(count * sizeof(T)));
    if (count > 0) std::memcpy(bytes_.data() + offset, data, count * sizeof(T));
    return offset;
  }
  const std::vector<char>& bytes() const { return bytes_; }

 private:
  std::vector<char>& bytes_;
};

// Adds the deferred split-k sum (DeviceWorkspace::pending), if any, into its output: for a
// reader of that output that does not fold it.
absl::Status flush_pending(const ForwardContext& ctx) {
  DeviceWorkspace& ws = *ctx.ws;
  if (ws.pending_splits <= 1) return absl::OkStatus();
  const int splits = std::exchange(ws.pending_splits, 1);
  return kernels::quant_gemm_reduce(ws.pending, splits, ctx.stream);
}

// A split-k sum for the kernel that folds it in as it reads y [m, n] (dense rows).
struct Fold {
  const float* partials = nullptr;
  int splits = 0;
};

// The pending sum of y, handed to its folding reader (none: Fold{}); a pending sum of any
// other output is flushed first.
absl::StatusOr<Fold> take_pending(const ForwardContext& ctx, const void* y, int m, int n) {
  DeviceWorkspace& ws = *ctx.ws;
  if (ws.pending_splits <= 1) return Fold{};
  const kernels::QuantGemmParams& q = ws.pending;
  if (q.y != y || q.m != m || q.n != n || q.ldy != n) {
    RETURN_IF_ERROR(flush_pending(ctx));
    return Fold{};
  }
  return Fold{q.partials, std::exchange(ws.pending_splits, 1)};
}

// out[r] = RMSNorm(x[rows ? rows[r] : r]) * weight in bf16 (with round_q8 further rounded
// as round_activations_q8 rounds a native GEMM's input), then a timer mark. Over every row
// the norm folds a pending split-k sum of x in; a gather flushes it first.
absl::Status rmsnorm(const ForwardContext& ctx, const DeviceBuffer& weight, const int32_t* rows,
                     int num_rows, void* out, bool round_q8) {
  kernels::RmsNormParams norm;
  norm.dtype = kAct;
  norm.x = ctx.ws->x.get<float>();
  norm.rows = rows;
  norm.weight = weight.get<float>();
  norm.out = out;
  norm.num_rows = num_rows;
  norm.dim = ctx.config->hidden_size;
  norm.eps = ctx.config->rms_eps;
  norm.round_q8 = round_q8;
  Fold fold;
  if (rows == nullptr) {
    ASSIGN_OR_RETURN(fold, take_pending(ctx, norm.x, num_rows, norm.dim));
  } else {
    RETURN_IF_ERROR(flush_pending(ctx));
  }
  norm.partials = fold.partials;
  norm.splits = fold.splits;
  RETURN_IF_ERROR(kernels::rmsnorm(norm, ctx.stream));
  return ctx.timer->mark(StepPart::kOther);
}

// The fused small-batch path (kernels/gemv.h) takes a linear layer when its shape allows;
// the choice depends on the shape alone, so a batch runs the same kernels every time.
// Whether a step of m tokens multiplies by w through the (quantized or bf16) GEMV.
bool use_gemv(const DeviceMatrix& w, int m) { return kernels::gemv_supported(w.format, m, w.k); }

kernels::GemvParams gemv_params(kernels::GemvInput input, const void* x, const DeviceMatrix& w,
                                kernels::GemvOutput output, void* y, int m, int n, int k) {
  kernels::GemvParams g;
  g.input = input;
  g.x = x;
  g.w = w.get();
  g.w_format = w.format;
  g.output = output;
  g.y = y;
  g.m = m;
  g.n = n;
  g.k = k;
  return g;
}

// The GEMM path (steps past the GEMV's kGemvMaxRows tokens) of y[m, n] = x[m, k] . w^T,
// with w = [w; w2] when w2 is set (a native wv of its own format; when the quantized GEMM
// runs, wv's runs beside w's on ctx.side_stream): cuBLASLt on a bf16 matrix. A native matrix
// reads its input rows ([m, k] bf16, in place) with their int8 rounding
// (kernels::round_activations_q8, or already rounded by the kernel that wrote them when
// `x_rounded`: RMSNorm and SwiGLU fuse it), exactly what the quantized GEMV computes with, so a
// token's numerics do not depend on whether its step had more than 8 tokens; then, up to
// kernels::quant_gemm_max_tokens() tokens (the device's measured crossover), the tensor-core
// GEMM that dequantizes fragments in registers
// (kernels/quant/quant_gemm.h: ~0.56 bytes of Q4 weight an element from HBM), past it the
// matrix dequantized into ws.gemm_scratch and cuBLASLt (~0.56 + 2 + 2 bytes an element, paid
// once for many tokens, with cuBLASLt's wgmma kernels for the multiply). The choice depends
// on m and the matrix alone (model/cuda/native_gemm_path.h: the rule, and the measurements
// behind it).
absl::Status gemm_linear(const ForwardContext& ctx, void* x, const DeviceMatrix& w,
                         const DeviceMatrix* w2, void* y, int m, int n, int k, GemmOut out,
                         bool x_rounded, bool defer = false) {
  RETURN_IF_ERROR(flush_pending(ctx));  // y may be x, which a pending sum still misses
  if (!w.native()) return ctx.gemm->linear(x, w.get(), y, m, n, k, out, ctx.stream);
  if (!x_rounded) RETURN_IF_ERROR(kernels::round_activations_q8(x, m, k, ctx.stream));
  const bool two = w2 != nullptr && !w2->empty();
  if (!by_deq_blas(m, n, k)) {
    const int64_t elem_bytes = out == GemmOut::kBf16 ? 2 : 4;
    // Columns [col, col + part.rows) of y, its split-k partial sums in `partials`.
    auto params = [&](const DeviceMatrix& part, int64_t col, float* partials,
                      int64_t partials_floats) {
      kernels::QuantGemmParams q;
      q.format = part.format;
      q.w = part.get();
      q.x = x;
      q.output = out == GemmOut::kBf16   ? kernels::GemvOutput::kBf16
                 : out == GemmOut::kFp32 ? kernels::GemvOutput::kFp32
                                         : kernels::GemvOutput::kFp32Accumulate;
      q.y = static_cast<char*>(y) + col * elem_bytes;
      q.ldy = n;
      q.m = m;
      q.n = static_cast<int>(part.rows);
      q.k = k;
      q.partials = partials;
      q.partials_floats = partials_floats;
      return q;
    };
    // Past the two buffers of grouped bf16 copies (which later GEMMs still read).
    const int64_t group_floats = ctx.ws->group_stride;  // 2 x stride bf16 elements
    float* scratch = ctx.ws->gemm_scratch.get<float>() + group_floats;
    const int64_t scratch_floats =
        static_cast<int64_t>(ctx.ws->gemm_scratch.bytes() / sizeof(float)) - group_floats;
    if (!two) {
      // `defer`: a split k's sum is left to the kernel that reads y next (DeviceWorkspace::
      // pending), one launch and one pass over y fewer, at the step sizes where that wins
      // (native_gemm_path.h).
      kernels::QuantGemmParams q = params(w, 0, scratch, scratch_floats);
      q.defer_reduction = defer && native_gemm_folds_split_sum(m);
      int splits = 1;
      RETURN_IF_ERROR(kernels::quant_gemm(q, ctx.num_sms, ctx.stream, &splits));
      if (q.defer_reduction && splits > 1) {
        ctx.ws->pending = q;
        ctx.ws->pending_splits = splits;
      }
      return absl::OkStatus();
    }
    // wv (a format of its own, e.g. Q6_K beside Q4_K) beside [wq; wk], on the side stream:
    // its few row tiles fill SMs that [wq; wk]'s grid leaves idle, where one after the other
    // they took a round of their own. Each has half the scratch for its partial sums.
    const int64_t half = scratch_floats / 2;
    CUDA_CHECK(cudaEventRecord(ctx.fork, ctx.stream));
    CUDA_CHECK(cudaStreamWaitEvent(ctx.side_stream, ctx.fork, 0));
    RETURN_IF_ERROR(kernels::quant_gemm(params(w, 0, scratch, half), ctx.num_sms, ctx.stream));
    RETURN_IF_ERROR(kernels::quant_gemm(params(*w2, w.rows, scratch + half, half), ctx.num_sms,
                                        ctx.side_stream));
    CUDA_CHECK(cudaEventRecord(ctx.join, ctx.side_stream));
    CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, ctx.join, 0));
    return absl::OkStatus();
  }
  const void* grouped = grouped_copy(ctx, w);
  if (grouped != nullptr) {
    RETURN_IF_ERROR(ctx.gemm->linear(x, grouped, y, m, n, k, out, ctx.stream));
    return group_gemm_done(ctx);
  }
  int64_t row = 0;
  for (const DeviceMatrix* part : {&w, two ? w2 : nullptr}) {
    if (part == nullptr) continue;
    RETURN_IF_ERROR(kernels::dequantize_bf16(
        whole_matrix_dequantize(*part, ctx.ws->gemm_scratch.get<uint16_t>() + row * part->k),
        ctx.stream));
    row += part->rows;
  }
  return ctx.gemm->linear(x, ctx.ws->gemm_scratch.get(), y, m, n, k, out, ctx.stream);
}

// y[m, n] = RMSNorm(x rows) . w^T (rows gathered as in rmsnorm()): one fused GEMV, or the
// norm into `normed` [m, hidden] bf16 and gemm_linear(). `w` may be [wq; wk] + `w2` (wv).
absl::Status norm_linear(const ForwardContext& ctx, const DeviceBuffer& norm_weight,
                         const int32_t* rows, int m, const DeviceMatrix& w, int n, void* normed,
                         void* y, GemmOut out, const DeviceMatrix* w2 = nullptr,
                         bool defer = false) {
  const int k = ctx.config->hidden_size;
  if (use_gemv(w, m) && (w2 == nullptr || w2->empty())) {
    RETURN_IF_ERROR(flush_pending(ctx));
    kernels::GemvParams g = gemv_params(
        kernels::GemvInput::kRmsNorm, ctx.ws->x.get(), w,
        out == GemmOut::kFp32 ? kernels::GemvOutput::kFp32 : kernels::GemvOutput::kBf16, y, m,
        n, k);
    g.rows = rows;
    g.norm_weight = norm_weight.get<float>();
    g.eps = ctx.config->rms_eps;
    RETURN_IF_ERROR(kernels::gemv(g, ctx.num_sms, ctx.stream));
  } else {
    RETURN_IF_ERROR(rmsnorm(ctx, norm_weight, rows, m, normed, /*round_q8=*/w.native()));
    RETURN_IF_ERROR(
        gemm_linear(ctx, normed, w, w2, y, m, n, k, out, /*x_rounded=*/w.native(), defer));
  }
  return ctx.timer->mark(StepPart::kGemm);
}

// x[t, hidden] += in[t, k] . w^T: the O and down projections with the residual add.
// `in_rounded`: `in` already holds round_activations_q8's values (gemm_linear).
absl::Status linear_residual(const ForwardContext& ctx, void* in, const DeviceMatrix& w,
                             int t, int k, bool in_rounded) {
  const int n = ctx.config->hidden_size;
  if (use_gemv(w, t)) {
    RETURN_IF_ERROR(flush_pending(ctx));
    RETURN_IF_ERROR(kernels::gemv(gemv_params(kernels::GemvInput::kBf16, in, w,
                                              kernels::GemvOutput::kFp32Accumulate,
                                              ctx.ws->x.get(), t, n, k),
                                  ctx.num_sms, ctx.stream));
  } else {
    RETURN_IF_ERROR(
        gemm_linear(ctx, in, w, nullptr, ctx.ws->x.get(), t, n, k, GemmOut::kFp32Accumulate,
                    in_rounded, /*defer=*/true));
  }
  return ctx.timer->mark(StepPart::kGemm);
}

void attention_stats(const AttentionRun& r, ForwardStats* stats) {
  if (stats == nullptr) return;
  AttentionPhaseStats& phase = r.prefill ? stats->prefill : stats->decode;
  phase.flops += r.flops;
  phase.bytes += r.bytes;
  phase.calls += 1;
}

// Attention for one run of same-phase sequences, bracketed by timer marks; a decode run's
// output rounded for the O projection's native GEMM when `round_q8_out`.
absl::Status attention_run(const ForwardContext& ctx, const DeviceBatch& b,
                           const AttentionRun& r, int layer, ForwardStats* stats,
                           bool round_q8_out) {
  const kernels::AttentionParams p = attention_params(ctx, b, r, layer, round_q8_out);
  if (r.prefill) {
    RETURN_IF_ERROR(kernels::attention_prefill(p, ctx.stream));
  } else {
    RETURN_IF_ERROR(kernels::attention_decode(p, attention_decode_splits(ctx, r),
                                                 ctx.ws->decode_scratch.get(),
                                                 ctx.ws->decode_scratch.bytes(), ctx.stream));
  }
  attention_stats(r, stats);
  return ctx.timer->mark(r.prefill ? StepPart::kAttentionPrefill : StepPart::kAttentionDecode);
}

// Attention over the whole batch, one launch per run.
absl::Status attention_all(const ForwardContext& ctx, const DeviceBatch& b, int layer,
                           ForwardStats* stats, bool round_q8_out) {
  RETURN_IF_ERROR(ctx.timer->mark(StepPart::kOther, /*always=*/true));
  for (const AttentionRun& r : b.runs) {
    RETURN_IF_ERROR(attention_run(ctx, b, r, layer, stats, round_q8_out));
  }
  return absl::OkStatus();
}

// Where RoPE puts this layer's Q (packed) and K, V (the paged cache), from ws.qkv, with the
// layer's Q/K/V bias and Q/K norms where the architecture has them.
kernels::RopeAppendParams rope_params(const ForwardContext& ctx, const DeviceLayer& w,
                                      const DeviceBatch& b, int layer) {
  const ModelConfig& c = *ctx.config;
  kernels::RopeAppendParams rope;
  rope.dtype = kAct;
  rope.qkv = ctx.ws->qkv.get();
  rope.cos = ctx.ws->rope_cos.get<float>();
  rope.sin = ctx.ws->rope_sin.get<float>();
  rope.positions = b.positions;
  rope.slot_mapping = b.slot_mapping;
  rope.q_out = ctx.ws->q.get();
  rope.k_cache = ctx.cache->k_layer(layer);
  rope.v_cache = ctx.cache->v_layer(layer);
  rope.num_tokens = b.num_tokens;
  rope.num_heads = c.num_heads;
  rope.num_kv_heads = c.num_kv_heads;
  rope.head_dim = c.head_dim;
  rope.block_size = ctx.cache->block_size;
  rope.style = kernels::RopeStyle::kAdjacentPairs;  // every file's rows (model/weights.h)
  rope.bias = w.bqkv.get<float>();
  rope.q_norm = w.q_norm.get<float>();
  rope.k_norm = w.k_norm.get<float>();
  rope.norm_eps = c.rms_eps;
  return rope;
}

// The QKV projection of a small batch by GEMVs, with RoPE and the KV append fused into the
// GEMV where it can be (no bias, no Q/K norm): one launch, or two when wv is separate (Q/K
// columns, then V's). With a bias or Q/K norms the GEMVs write ws.qkv and rope_qkv_append
// does the rest; a separate wv then needs one GEMV per token and part, so that V's columns
// land after Q/K's in each token's row (only files with mixed QKV formats pay for this).
absl::Status qkv_gemv(const ForwardContext& ctx, const DeviceLayer& w, int t,
                      const kernels::RopeAppendParams& rope) {
  const ModelConfig& c = *ctx.config;
  DeviceWorkspace& ws = *ctx.ws;
  const int qkv_dim = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  const int v_dim = c.num_kv_heads * c.head_dim, qk_dim = qkv_dim - v_dim;
  const bool fused_rope = rope.bias == nullptr && rope.q_norm == nullptr;
  RETURN_IF_ERROR(flush_pending(ctx));  // the GEMVs read x
  // Columns [first_col, first_col + n) of `rows` tokens from token row0 on.
  auto part = [&](const DeviceMatrix& m, int first_col, int n, int rows, int row0) {
    kernels::GemvParams g = gemv_params(
        kernels::GemvInput::kRmsNorm, ws.x.get<float>() + int64_t{row0} * c.hidden_size, m,
        fused_rope ? kernels::GemvOutput::kRopeAppend : kernels::GemvOutput::kBf16,
        fused_rope ? nullptr : ws.qkv.get<uint16_t>() + int64_t{row0} * qkv_dim + first_col, rows,
        n, c.hidden_size);
    g.norm_weight = w.attn_norm.get<float>();
    g.eps = c.rms_eps;
    g.rope = rope;
    g.rope_first_col = first_col;
    return kernels::gemv(g, ctx.num_sms, ctx.stream);
  };
  if (w.wv.empty()) {
    RETURN_IF_ERROR(part(w.wqkv, 0, qkv_dim, t, 0));
  } else if (fused_rope) {
    RETURN_IF_ERROR(part(w.wqkv, 0, qk_dim, t, 0));
    RETURN_IF_ERROR(part(w.wv, qk_dim, v_dim, t, 0));
  } else {
    for (int r = 0; r < t; ++r) {  // m = 1 each: y is one row, at that token's offset
      RETURN_IF_ERROR(part(w.wqkv, 0, qk_dim, 1, r));
      RETURN_IF_ERROR(part(w.wv, qk_dim, v_dim, 1, r));
    }
  }
  RETURN_IF_ERROR(ctx.timer->mark(StepPart::kGemm));
  if (!fused_rope) RETURN_IF_ERROR(kernels::rope_qkv_append(rope, ctx.stream));
  return absl::OkStatus();
}

// x += O(attention(RoPE(QKV(RMSNorm(x))))): at small batch the norm, the QKV projection,
// RoPE and the KV append are one GEMV, unless the architecture adds a bias or normalises Q
// and K per head (the GEMV epilogue rotates pairs as they come out, with no view of a whole
// head): then the GEMV writes QKV and rope_qkv_append does the rest.
absl::Status attention_block(const ForwardContext& ctx, const DeviceLayer& w,
                             const DeviceBatch& b, int layer, ForwardStats* stats) {
  const ModelConfig& c = *ctx.config;
  DeviceWorkspace& ws = *ctx.ws;
  const int t = b.num_tokens;
  const int q_dim = c.num_heads * c.head_dim;
  const int qkv_dim = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  const kernels::RopeAppendParams rope = rope_params(ctx, w, b, layer);
  if (use_gemv(w.wqkv, t) && (w.wv.empty() || use_gemv(w.wv, t))) {
    RETURN_IF_ERROR(qkv_gemv(ctx, w, t, rope));
  } else {
    RETURN_IF_ERROR(norm_linear(ctx, w.attn_norm, nullptr, t, w.wqkv, qkv_dim, ws.xn.get(),
                                ws.qkv.get(), GemmOut::kBf16, &w.wv));
    RETURN_IF_ERROR(kernels::rope_qkv_append(rope, ctx.stream));
  }
  // The O projection's native GEMM input: rounded by the attention kernels as they store it
  // (decode and prefill: one pass fewer, and in a step with prefills one launch a layer
  // fewer); a GEMV rounds its own input.
  const bool round_o = w.wo.native() && !use_gemv(w.wo, t);
  RETURN_IF_ERROR(attention_all(ctx, b, layer, stats, round_o));
  return linear_residual(ctx, ws.attn.get(), w.wo, t, q_dim, /*in_rounded=*/round_o);
}

// x += down(silu(gate(RMSNorm(x))) * up(RMSNorm(x))): at small batch the norm, the fused
// gate/up projection and SwiGLU are one GEMV.
absl::Status ffn_block(const ForwardContext& ctx, const DeviceLayer& w, int t) {
  const ModelConfig& c = *ctx.config;
  DeviceWorkspace& ws = *ctx.ws;
  if (use_gemv(w.w_gate_up, t)) {
    RETURN_IF_ERROR(flush_pending(ctx));  // the GEMV reads x
    kernels::GemvParams g =
        gemv_params(kernels::GemvInput::kRmsNorm, ws.x.get(), w.w_gate_up,
                    kernels::GemvOutput::kSwiglu, ws.ffn.get(), t, c.ffn_size, c.hidden_size);
    g.norm_weight = w.ffn_norm.get<float>();
    g.eps = c.rms_eps;
    RETURN_IF_ERROR(kernels::gemv(g, ctx.num_sms, ctx.stream));
    RETURN_IF_ERROR(ctx.timer->mark(StepPart::kGemm));
  } else {
    RETURN_IF_ERROR(norm_linear(ctx, w.ffn_norm, nullptr, t, w.w_gate_up, 2 * c.ffn_size,
                                ws.xn.get(), ws.gate_up.get(), GemmOut::kBf16, nullptr,
                                /*defer=*/true));
    ASSIGN_OR_RETURN(const Fold fold, take_pending(ctx, ws.gate_up.get(), t, 2 * c.ffn_size));
    kernels::SwigluParams act;
    act.partials = fold.partials;  // gate_up's split-k sum, when its GEMM left it
    act.splits = fold.splits;
    act.dtype = kAct;
    act.gate_up = ws.gate_up.get();
    act.out = ws.ffn.get();
    act.num_rows = t;
    act.ffn_size = c.ffn_size;
    // The down projection's GEMM input, rounded here (a GEMV rounds its own input).
    act.round_q8 = w.w_down.native() && !use_gemv(w.w_down, t);
    RETURN_IF_ERROR(kernels::swiglu(act, ctx.stream));
    RETURN_IF_ERROR(ctx.timer->mark(StepPart::kOther));
    return linear_residual(ctx, ws.ffn.get(), w.w_down, t, c.ffn_size, act.round_q8);
  }
  return linear_residual(ctx, ws.ffn.get(), w.w_down, t, c.ffn_size, /*in_rounded=*/false);
}

}  // namespace

int attention_decode_splits(const ForwardContext& ctx, const AttentionRun& r) {
  // Rounded down to a power of two: each distinct count is another decode graph.
  return static_cast<int>(std::bit_floor(static_cast<unsigned>(kernels::attention_decode_num_splits(
      r.s1 - r.s0, ctx.config->num_kv_heads, r.max_seqlen_k, ctx.num_sms))));
}

absl::Status reserve_workspace(const ForwardContext& ctx, int max_tokens, int max_seqs,
                               size_t metadata_bytes) {
  const ModelConfig& c = *ctx.config;
  RETURN_IF_ERROR(reserve_token_buffers(ctx, std::max(max_tokens, max_seqs), max_seqs));
  RETURN_IF_ERROR(ctx.ws->penalty_scratch.reserve(sizeof(float)));
  RETURN_IF_ERROR(ctx.ws->decode_scratch.reserve(
      decode_scratch_bytes(c, max_seqs, kernels::kMaxDecodeSplits)));
  RETURN_IF_ERROR(ctx.ws->metadata.reserve(metadata_bytes));
  if (ctx.weights->max_dequant_bytes > 0) {
    RETURN_IF_ERROR(ctx.ws->gemm_scratch.reserve(static_cast<size_t>(ctx.weights->max_dequant_bytes)));
  }
  return reserve_rope_tables(ctx, 0);
}

size_t metadata_bytes(int max_tokens, int max_seqs, int table_width) {
  // Penalty lists beyond the per-token and per-sequence arrays: more only reallocates.
  constexpr size_t kMetadataSlack = size_t{1} << 20;
  const size_t ints = 3 * static_cast<size_t>(std::max(max_tokens, max_seqs)) +
                      static_cast<size_t>(max_seqs) * (4 + 2 * table_width);
  return ints * sizeof(int32_t) + max_seqs * sizeof(kernels::SampleSpec) + kMetadataSlack;
}

int64_t workspace_bytes(const ModelConfig& c, int max_tokens, int max_seqs,
                        size_t metadata_bytes, int64_t dequant_bytes) {
  const size_t tokens = std::max(max_tokens, max_seqs);
  return static_cast<int64_t>(token_buffer_sizes(c, tokens, max_seqs).total() + sizeof(float) +
                              decode_scratch_bytes(c, max_seqs, kernels::kMaxDecodeSplits) +
                              metadata_bytes + rope_table_bytes(c, c.context_length) +
                              Gemm::kWorkspaceBytes + dequant_bytes);
}

int64_t DeviceKvCache::bytes_per_block(const ModelConfig& c, int block_size) {
  return 2 * static_cast<int64_t>(c.num_layers) * c.num_kv_heads * block_size * c.head_dim *
         static_cast<int64_t>(kBf16Bytes);
}

absl::StatusOr<DeviceBatch> upload_batch(const ForwardContext& ctx, const ForwardBatch& batch,
                                         const std::vector<int32_t>& out_seqs,
                                         bool with_sampling) {
  DeviceBatch b;
  b.num_tokens = batch.num_tokens();
  b.num_seqs = batch.num_seqs();
  b.max_blocks_per_seq = batch.max_blocks_per_seq;
  b.num_out_rows = static_cast<int>(out_seqs.size());
  b.num_penalties = with_sampling ? static_cast<int>(batch.penalty_tokens.size()) : 0;
  b.max_position = *std::max_element(batch.positions.begin(), batch.positions.end());
  std::vector<int32_t> run_cu, out_rows;
  b.runs = plan_runs(*ctx.config, batch, &run_cu);
  for (int32_t s : out_seqs) out_rows.push_back(batch.cu_seqlens_q[s + 1] - 1);

  MetadataPacker pack(&ctx.ws->metadata_host);
  const size_t specs = with_sampling ? pack.add(batch.sample_specs.data(), b.num_out_rows) : 0;
  const size_t tokens = pack.add(batch.token_ids.data(), b.num_tokens);
  const size_t positions = pack.add(batch.positions.data(), b.num_tokens);
  const size_t slots = pack.add(batch.slot_mapping.data(), b.num_tokens);
  const size_t seqlens = pack.add(batch.seqlens_k.data(), b.num_seqs);
  const size_t tables = pack.add(batch.block_tables.data(), batch.block_tables.size());
  const size_t cu = pack.add(run_cu.data(), run_cu.size());
  const size_t rows = pack.add(out_rows.data(), out_rows.size());
  const size_t pen_tokens = pack.add(batch.penalty_tokens.data(), b.num_penalties);
  const size_t pen_counts = pack.add(batch.penalty_counts.data(), b.num_penalties);
  const size_t bytes = pack.bytes().size();
  b.results_offset = aligned(bytes);

  DeviceWorkspace& ws = *ctx.ws;
  RETURN_IF_ERROR(ws.metadata.reserve(bytes));
  RETURN_IF_ERROR(ws.staging.reserve(
      b.results_offset + std::max(b.num_out_rows, 1) * sizeof(kernels::SampleResult)));
  std::memcpy(ws.staging.get(), pack.bytes().data(), bytes);
  const char* base = ws.metadata.get<char>();
  auto at = [base](size_t offset) { return reinterpret_cast<const int32_t*>(base + offset); };
  b.specs = with_sampling ? reinterpret_cast<const kernels::SampleSpec*>(base + specs) : nullptr;
  b.token_ids = at(tokens);
  b.positions = at(positions);
  b.slot_mapping = at(slots);
  b.seqlens_k = at(seqlens);
  b.block_tables = at(tables);
  b.run_cu_seqlens = at(cu);
  b.out_rows = at(rows);
  b.penalty_tokens = at(pen_tokens);
  b.penalty_counts = at(pen_counts);
  RETURN_IF_ERROR(reserve_workspace(ctx, b));
  RETURN_IF_ERROR(reserve_rope_tables(ctx, b.max_position));
  CUDA_CHECK(cudaMemcpyAsync(ws.metadata.get(), ws.staging.get(), bytes,
                                          cudaMemcpyHostToDevice, ctx.stream));
  return b;
}

// x[t, :] = token_embd[token_ids[t], :] in fp32: the bf16 table gathered, or a native one
// dequantized row by row (exactly ggml's values).
absl::Status embed_tokens(const ForwardContext& ctx, const DeviceBatch& b) {
  const DeviceMatrix& table = ctx.weights->token_embd;
  if (table.native()) {
    kernels::DequantizeParams d;
    d.format = table.format;
    d.w = table.get();
    d.num_rows = table.rows;
    d.k = table.k;
    d.row_end = b.num_tokens;
    d.row_ids = b.token_ids;
    d.out = ctx.ws->x.get<float>();
    d.out_fp32 = true;
    return kernels::dequantize_bf16(d, ctx.stream);
  }
  kernels::EmbeddingParams embed;
  embed.dtype = kAct;
  embed.table = table.get();
  embed.token_ids = b.token_ids;
  embed.out = ctx.ws->x.get<float>();
  embed.num_tokens = b.num_tokens;
  embed.dim = ctx.config->hidden_size;
  return kernels::embedding_gather(embed, ctx.stream);
}

absl::Status llama_forward_cuda(const ForwardContext& ctx, const DeviceBatch& b,
                                int num_layers, ForwardStats* stats) {
  const ModelConfig& c = *ctx.config;
  const DeviceWeights& weights = *ctx.weights;
  DeviceWorkspace& ws = *ctx.ws;
  ws.pending_splits = 1;  // none left by a pass that stopped on an error
  begin_dequant_groups(ctx, num_layers, b.num_tokens,
                       std::none_of(b.runs.begin(), b.runs.end(),
                                    [](const AttentionRun& r) { return r.prefill; }));
  RETURN_IF_ERROR(embed_tokens(ctx, b));
  for (int layer = 0; layer < num_layers; ++layer) {
    RETURN_IF_ERROR(prepare_layer_group(ctx, layer, num_layers, b.num_tokens));
    RETURN_IF_ERROR(attention_block(ctx, weights.layers[layer], b, layer, stats));
    RETURN_IF_ERROR(ffn_block(ctx, weights.layers[layer], b.num_tokens));
  }
  end_dequant_groups(ctx);
  RETURN_IF_ERROR(flush_pending(ctx));  // the last down's sum: x is whole after the pass
  if (b.num_out_rows == 0) return absl::OkStatus();
  // The last token of each sequence read, gathered by the norm.
  return norm_linear(ctx, weights.output_norm, b.out_rows, b.num_out_rows, weights.lm_head(),
                     c.vocab_size, ws.last.get(), ws.logits.get(), GemmOut::kFp32);
}

absl::Status sample_cuda(const ForwardContext& ctx, const DeviceBatch& b,
                         const kernels::SampleResult** results) {
  DeviceWorkspace& ws = *ctx.ws;
  kernels::SamplingBatch s;
  s.logits = ws.logits.get<float>();
  s.specs = b.specs;
  s.penalty_tokens = b.penalty_tokens;
  s.penalty_counts = b.penalty_counts;
  s.penalty_scratch = ws.penalty_scratch.get<float>();
  s.results = ws.results.get<kernels::SampleResult>();
  s.num_rows = b.num_out_rows;
  s.vocab = ctx.config->vocab_size;
  RETURN_IF_ERROR(kernels::sample_tokens(s, ctx.stream));
  RETURN_IF_ERROR(ctx.timer->mark(StepPart::kOther));
  // Results land after the metadata in the staging buffer (upload_batch sized it so).
  char* host = ws.staging.get<char>() + b.results_offset;
  CUDA_CHECK(cudaMemcpyAsync(host, ws.results.get(),
                                          b.num_out_rows * sizeof(kernels::SampleResult),
                                          cudaMemcpyDeviceToHost, ctx.stream));
  *results = reinterpret_cast<const kernels::SampleResult*>(host);
  return absl::OkStatus();
}

}  // namespace flashserve::model::cuda
