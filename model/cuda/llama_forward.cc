#include "model/cuda/llama_forward.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

#include "kernels/attention/attention.h"
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
kernels::AttentionParams attention_params(const ForwardContext& ctx, const DeviceBatch& b,
                                          const AttentionRun& r, int layer,
                                          bool round_q8_out = false) {
  const ModelConfig& c = *ctx.config;
  const int64_t q_row = static_cast<int64_t>(c.num_heads) * c.head_dim;
  kernels::AttentionParams p = attention_shape(ctx, r);
  p.dtype = kAct;
  p.q = ctx.ws->q.get<uint16_t>() + r.t0 * q_row;
  p.k_cache = ctx.cache->k_layer(layer);
  p.v_cache = ctx.cache->v_layer(layer);
  p.out = ctx.ws->attn.get<uint16_t>() + r.t0 * q_row;
  p.cu_seqlens_q = b.run_cu_seqlens + r.cu_offset;
  p.seqlens_k = b.seqlens_k + r.s0;
  p.block_tables = b.block_tables + static_cast<int64_t>(r.s0) * b.max_blocks_per_seq;
  p.block_size = ctx.cache->block_size;
  p.max_blocks_per_seq = b.max_blocks_per_seq;
  p.num_cache_blocks = ctx.cache->num_blocks;
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  p.round_q8_out = round_q8_out;
  return p;
}

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
  DeviceBuffer& scratch = ctx.ws->attention_scratch;
  if (r.prefill) {
    RETURN_IF_ERROR(kernels::attention_prefill(p, attention_prefill_splits(ctx, r), scratch.get(),
                                               scratch.bytes(), ctx.stream));
  } else {
    RETURN_IF_ERROR(kernels::attention_decode(p, attention_decode_splits(ctx, r), scratch.get(),
                                              scratch.bytes(), ctx.stream));
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

kernels::AttentionParams attention_shape(const ForwardContext& ctx, const AttentionRun& r) {
  kernels::AttentionParams p;
  p.num_seqs = r.s1 - r.s0;
  p.max_seqlen_q = r.max_seqlen_q;
  p.max_seqlen_k = r.max_seqlen_k;
  p.num_heads = ctx.config->num_heads;
  p.num_kv_heads = ctx.config->num_kv_heads;
  p.head_dim = ctx.config->head_dim;
  p.causal = true;
  return p;
}

int attention_prefill_splits(const ForwardContext& ctx, const AttentionRun& r) {
  return kernels::attention_prefill_num_splits(attention_shape(ctx, r), ctx.num_sms);
}

int64_t DeviceKvCache::bytes_per_block(const ModelConfig& c, int block_size) {
  return 2 * static_cast<int64_t>(c.num_layers) * c.num_kv_heads * block_size * c.head_dim *
         static_cast<int64_t>(sizeof(uint16_t));
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
  // Results land after the metadata in the step's staging buffer (upload_batch sized it so).
  char* host = ws.staging[b.staging_slot].get<char>() + b.results_offset;
  CUDA_CHECK(cudaMemcpyAsync(host, ws.results.get(),
                                          b.num_out_rows * sizeof(kernels::SampleResult),
                                          cudaMemcpyDeviceToHost, ctx.stream));
  *results = reinterpret_cast<const kernels::SampleResult*>(host);
  return absl::OkStatus();
}

}  // namespace flashserve::model::cuda
