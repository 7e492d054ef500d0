#include "model/cuda/batch_upload.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <utility>

#include "base/status_macros.h"
#include "kernels/attention/attention.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda_check.h"
#include "model/cuda/gemm.h"

namespace flashserve::model::cuda {
namespace {

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

// The step buffers with their sizes, in TokenBufferSizes order (ws.results last).
std::array<std::pair<DeviceBuffer*, size_t>, 10> token_buffers(DeviceWorkspace& ws,
                                                               const TokenBufferSizes& z) {
  return {{{&ws.x, z.x},
           {&ws.xn, z.xn},
           {&ws.qkv, z.qkv},
           {&ws.q, z.q},
           {&ws.attn, z.attn},
           {&ws.gate_up, z.gate_up},
           {&ws.ffn, z.ffn},
           {&ws.last, z.last},
           {&ws.logits, z.logits},
           {&ws.results, z.results}}};
}

// Grows the step buffers to `z`; ws.results keeps the last step's samples (a step may name
// them: ForwardBatch::previous_samples).
absl::Status reserve_token_buffers(const ForwardContext& ctx, const TokenBufferSizes& z) {
  for (auto [buffer, bytes] : token_buffers(*ctx.ws, z)) {
    RETURN_IF_ERROR(buffer == &ctx.ws->results ? buffer->reserve_keeping(bytes, ctx.stream)
                                                : buffer->reserve(bytes));
  }
  return absl::OkStatus();
}

// Split-KV partials of one attention run: a decode over r's sequences in its splits, or a
// split prefill.
size_t attention_scratch_bytes(const ForwardContext& ctx, const AttentionRun& r) {
  const kernels::AttentionParams p = attention_shape(ctx, r);
  return r.prefill ? kernels::attention_prefill_workspace_bytes(p, attention_prefill_splits(ctx, r))
                   : kernels::attention_decode_workspace_bytes(p, attention_decode_splits(ctx, r));
}

// The most attention_scratch_bytes can be for steps of up to max_seqs sequences on num_sms
// SMs: decode at its largest split count, or the split prefill's bound.
size_t attention_scratch_bound(const ModelConfig& c, int max_seqs, int num_sms) {
  kernels::AttentionParams p;
  p.num_seqs = max_seqs;
  p.num_heads = c.num_heads;
  p.head_dim = c.head_dim;
  return std::max(kernels::attention_decode_workspace_bytes(p, kernels::kMaxDecodeSplits),
                  kernels::attention_prefill_workspace_bound(c.head_dim, num_sms));
}

// RoPE table bytes (cos and sin, fp32) for positions [0, num_positions).
size_t rope_table_bytes(const ModelConfig& c, int64_t num_positions) {
  return 2 * static_cast<size_t>(num_positions) * (c.head_dim / 2) * sizeof(float);
}

// What one step needs of the workspace.
struct StepBytes {
  TokenBufferSizes tokens;
  size_t penalty_scratch, attention_scratch, metadata, staging;
};

StepBytes step_bytes(const ForwardContext& ctx, const PackedBatch& p) {
  const DeviceBatch& b = p.b;
  size_t scratch_bytes = 0;
  for (const AttentionRun& r : b.runs) {
    scratch_bytes = std::max(scratch_bytes, attention_scratch_bytes(ctx, r));
  }
  const size_t rows = std::max(b.num_out_rows, 1);
  return {token_buffer_sizes(*ctx.config, b.num_tokens, rows),
          std::max(b.num_penalties, 1) * sizeof(float), std::max<size_t>(scratch_bytes, 1),
          p.layout.bytes, b.results_offset + rows * sizeof(kernels::SampleResult)};
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

// Grows the workspace to what the step needs. The invariant that makes this safe is
// DeviceWorkspace's: no launched step can still use a buffer that grows here (a reallocation
// frees the old one), because a runner with a step in flight asks upload_grows_workspace
// first and finishes that step when it says yes.
absl::Status reserve_step(const ForwardContext& ctx, const PackedBatch& p, int staging_slot) {
  DeviceWorkspace& ws = *ctx.ws;
  const StepBytes z = step_bytes(ctx, p);
  RETURN_IF_ERROR(reserve_token_buffers(ctx, z.tokens));
  RETURN_IF_ERROR(ws.penalty_scratch.reserve(z.penalty_scratch));
  RETURN_IF_ERROR(ws.attention_scratch.reserve(z.attention_scratch));
  RETURN_IF_ERROR(ws.metadata.reserve(z.metadata));
  RETURN_IF_ERROR(ws.staging[staging_slot].reserve(z.staging));
  return reserve_rope_tables(ctx, p.b.max_position);
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

}  // namespace

absl::Status reserve_workspace(const ForwardContext& ctx, int max_tokens, int max_seqs,
                               size_t metadata_bytes) {
  const ModelConfig& c = *ctx.config;
  RETURN_IF_ERROR(reserve_token_buffers(
      ctx, token_buffer_sizes(c, std::max(max_tokens, max_seqs), max_seqs)));
  RETURN_IF_ERROR(ctx.ws->penalty_scratch.reserve(sizeof(float)));
  RETURN_IF_ERROR(
      ctx.ws->attention_scratch.reserve(attention_scratch_bound(c, max_seqs, ctx.num_sms)));
  RETURN_IF_ERROR(ctx.ws->metadata.reserve(metadata_bytes));
  for (PinnedBuffer& staging : ctx.ws->staging) {
    RETURN_IF_ERROR(
        staging.reserve(aligned(metadata_bytes) + max_seqs * sizeof(kernels::SampleResult)));
  }
  if (ctx.weights->max_dequant_bytes > 0) {
    RETURN_IF_ERROR(ctx.ws->gemm_scratch.reserve(static_cast<size_t>(ctx.weights->max_dequant_bytes)));
  }
  return reserve_rope_tables(ctx, 0);
}

size_t metadata_bytes(int max_tokens, int max_seqs, int table_width) {
  // Penalty lists beyond the per-token and per-sequence arrays: more only reallocates.
  constexpr size_t kMetadataSlack = size_t{1} << 20;
  // Per sequence, besides 2 * table_width for its block table: seqlens_k, up to two rebased
  // cu_seqlens, an output row and a (t, i) pair of previous_samples.
  const size_t ints = 3 * static_cast<size_t>(std::max(max_tokens, max_seqs)) +
                      static_cast<size_t>(max_seqs) * (6 + 2 * table_width);
  return ints * sizeof(int32_t) + max_seqs * sizeof(kernels::SampleSpec) + kMetadataSlack;
}

int64_t workspace_bytes(const ModelConfig& c, int max_tokens, int max_seqs, int num_sms,
                        size_t metadata_bytes, int64_t dequant_bytes) {
  const size_t tokens = std::max(max_tokens, max_seqs);
  return static_cast<int64_t>(token_buffer_sizes(c, tokens, max_seqs).total() + sizeof(float) +
                              attention_scratch_bound(c, max_seqs, num_sms) +
                              metadata_bytes + rope_table_bytes(c, c.context_length) +
                              Gemm::kWorkspaceBytes + dequant_bytes);
}

PackedBatch pack_batch(const ForwardContext& ctx, const ForwardBatch& batch,
                       const std::vector<int32_t>& out_seqs, bool with_sampling) {
  PackedBatch p;
  DeviceBatch& b = p.b;
  b.num_tokens = batch.num_tokens();
  b.num_seqs = batch.num_seqs();
  b.max_blocks_per_seq = batch.max_blocks_per_seq;
  b.num_out_rows = static_cast<int>(out_seqs.size());
  b.num_penalties = with_sampling ? static_cast<int>(batch.penalty_tokens.size()) : 0;
  b.max_position = *std::max_element(batch.positions.begin(), batch.positions.end());
  std::vector<int32_t> run_cu, out_rows, gather_pairs;
  b.runs = plan_runs(*ctx.config, batch, &run_cu);
  for (int32_t s : out_seqs) out_rows.push_back(batch.cu_seqlens_q[s + 1] - 1);
  for (size_t t = 0; t < batch.previous_samples.size(); ++t) {
    if (batch.previous_samples[t] < 0) continue;
    gather_pairs.push_back(static_cast<int32_t>(t));
    gather_pairs.push_back(batch.previous_samples[t]);
  }
  p.with_sampling = with_sampling;
  p.num_gathered = static_cast<int>(gather_pairs.size() / 2);

  MetadataPacker pack(&ctx.ws->metadata_host);
  MetadataLayout& at = p.layout;
  at.specs = with_sampling ? pack.add(batch.sample_specs.data(), b.num_out_rows) : 0;
  at.token_ids = pack.add(batch.token_ids.data(), b.num_tokens);
  at.positions = pack.add(batch.positions.data(), b.num_tokens);
  at.slot_mapping = pack.add(batch.slot_mapping.data(), b.num_tokens);
  at.seqlens_k = pack.add(batch.seqlens_k.data(), b.num_seqs);
  at.block_tables = pack.add(batch.block_tables.data(), batch.block_tables.size());
  at.run_cu_seqlens = pack.add(run_cu.data(), run_cu.size());
  at.out_rows = pack.add(out_rows.data(), out_rows.size());
  at.penalty_tokens = pack.add(batch.penalty_tokens.data(), b.num_penalties);
  at.penalty_counts = pack.add(batch.penalty_counts.data(), b.num_penalties);
  at.gather_pairs = pack.add(gather_pairs.data(), gather_pairs.size());
  at.bytes = pack.bytes().size();
  b.results_offset = aligned(at.bytes);
  return p;
}

bool upload_grows_workspace(const ForwardContext& ctx, const PackedBatch& p, int staging_slot) {
  DeviceWorkspace& ws = *ctx.ws;
  const StepBytes z = step_bytes(ctx, p);
  for (auto [buffer, bytes] : token_buffers(ws, z.tokens)) {
    if (bytes > buffer->bytes()) return true;
  }
  return z.penalty_scratch > ws.penalty_scratch.bytes() ||
         z.attention_scratch > ws.attention_scratch.bytes() || z.metadata > ws.metadata.bytes() ||
         z.staging > ws.staging[staging_slot].bytes() ||
         p.b.max_position >= ws.num_rope_positions;
}

absl::StatusOr<DeviceBatch> upload_batch(const ForwardContext& ctx, const PackedBatch& p,
                                         int staging_slot) {
  DeviceWorkspace& ws = *ctx.ws;
  RETURN_IF_ERROR(reserve_step(ctx, p, staging_slot));
  PinnedBuffer& staging = ws.staging[staging_slot];
  std::memcpy(staging.get(), ws.metadata_host.data(), p.layout.bytes);
  DeviceBatch b = p.b;
  b.staging_slot = staging_slot;
  char* base = ws.metadata.get<char>();
  auto at = [base](size_t offset) { return reinterpret_cast<int32_t*>(base + offset); };
  const MetadataLayout& l = p.layout;
  b.specs = p.with_sampling ? reinterpret_cast<const kernels::SampleSpec*>(base + l.specs)
                            : nullptr;
  b.token_ids = at(l.token_ids);
  b.positions = at(l.positions);
  b.slot_mapping = at(l.slot_mapping);
  b.seqlens_k = at(l.seqlens_k);
  b.block_tables = at(l.block_tables);
  b.run_cu_seqlens = at(l.run_cu_seqlens);
  b.out_rows = at(l.out_rows);
  b.penalty_tokens = at(l.penalty_tokens);
  b.penalty_counts = at(l.penalty_counts);
  CUDA_CHECK(cudaMemcpyAsync(ws.metadata.get(), staging.get(), l.bytes, cudaMemcpyHostToDevice,
                             ctx.stream));
  if (p.num_gathered == 0) return b;
  // ws.results still holds the previous step's samples: that step's sampling came before
  // this copy on the stream, and this step's comes after its forward pass.
  kernels::SampledTokenGather g;
  g.results = ws.results.get<kernels::SampleResult>();
  g.pairs = at(l.gather_pairs);
  g.token_ids = at(l.token_ids);
  g.num_pairs = p.num_gathered;
  RETURN_IF_ERROR(kernels::gather_sampled_tokens(g, ctx.stream));
  return b;
}

}  // namespace flashserve::model::cuda
