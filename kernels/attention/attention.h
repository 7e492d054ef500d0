#pragma once
// The CUDA attention kernels: plain C++ API (POD params + launchers taking a stream). Device
// code lives in kernels/attention/*.cuh; callers never see it.
//
// Every kernel reads K/V from the paged cache (kernels/paged_kv.h) through block tables, with
// the same semantics as the fp32 reference in kernels/cpu/attention_ref.h:
//   query i (0-based) of sequence s sits at position seqlens_k[s] - q_len(s) + i and, when
//   causal, sees keys at positions <= its own; without causal it sees all seqlens_k[s] keys.
//   With a sliding window W = sliding_window > 0 (local attention, e.g. Gemma 2/3's and
//   Mistral's local layers) the query at position p sees only keys k with p - k < W: the
//   last W positions up to and including its own (HF transformers' and llama.cpp's rule;
//   kernels/cpu/attention_ref.h has the citations). The fused kernels skip K/V tiles wholly
//   outside every window of a CTA (prefill) or split (decode), so a local layer's cost grows
//   with W, not with the context, and they never read a cache block all of whose keys lie
//   before the window of the sequence's first query of the call (position seqlens_k -
//   q_len - W + 1): its block table entry may name any block (one reused by another
//   sequence, say). attention_naive reads every entry up to seqlens_k.
//
//   attention_prefill  fused FlashAttention forward (QK^T -> mask -> online softmax -> PV in
//                      one kernel; S and P never reach device memory); varlen, causal,
//                      GQA/MQA, chunked prefill / prefix reuse through the block table.
//   attention_decode   one query per sequence, split-KV (flash-decoding) + an LSE combine;
//                      all query heads of a GQA group share each K/V tile.
//   attention_naive    the unfused baseline: S = QK^T materialised in device memory in the
//                      input dtype, a separate softmax kernel writes P, a third computes PV.
//
// Supported: head_dim 64 and 128, bf16 and fp16 inputs/outputs, fp32 accumulation; the cache
// block_size must be a multiple of 64 (the kernels' K/V tile). Anything else is rejected with
// InvalidArgument naming the value, before any work is launched. All pointers are device
// pointers: q, k_cache and v_cache 16-byte aligned, out 4-byte aligned (the kernels load in
// 16-byte pieces and store pairs of elements; InvalidArgument otherwise). cudaMalloc's pointers
// and whole-row offsets from them qualify. Launchers are asynchronous on `stream` and never
// synchronise.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/dtype.h"

// The runtime's own opaque stream type (identical to <cuda_runtime_api.h>'s typedef), so this
// header needs no CUDA headers.
typedef struct CUstream_st* cudaStream_t;

namespace flashserve::kernels {

// Which prefill kernel runs. kAuto: on compute capability 9.0 the faster of the two for the
// head_dim as measured (kernels/attention/attention_prefill.cu), elsewhere the portable
// mma.sync path (sm_80 instructions). kHopper on another GPU is an InvalidArgument. Tests and
// benchmarks pin each path to compare them. kHopperPersistent: the Hopper kernel's
// persistent form (one CTA an SM walks the tiles: a static walk on calls of at most 512 keys,
// past them tiles taken from a device-wide counter, or at head_dim 128 without the causal mask
// or a window, given the workspace, the stream-K walk), never split; kAuto picks it where it
// runs the Hopper kernel unsplit on at most 4,096 keys, more at head_dim 64 causal and 128
// full (attention_prefill_kernel_for; NOTES.md v25-v34). One persistent call of more than 512
// keys runs at a time on a device (calls on one stream or ordered between streams): two at
// once would take each other's tiles or hand-over flags.
enum class PrefillImpl { kAuto, kPortable, kHopper, kHopperPersistent };

// Keys per K/V tile in every attention kernel; the cache block_size must be a multiple.
inline constexpr int kAttentionKvTile = 64;
// Grid y and z dimensions (heads, sequences) are limited to this by CUDA.
inline constexpr int kMaxGridYZ = 65535;

struct AttentionParams {
  DType dtype = DType::kBf16;
  const void* q = nullptr;        // [num_tokens, num_heads, head_dim], packed by sequence
  const void* k_cache = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  const void* v_cache = nullptr;  // [num_blocks, num_kv_heads, block_size, head_dim]
  void* out = nullptr;            // [num_tokens, num_heads, head_dim]
  float* lse = nullptr;           // [num_tokens, num_heads] natural-log LSE, or nullptr
  // Prefill and naive: prefix sums of query lengths. Decode ignores it (query s is row s).
  const int32_t* cu_seqlens_q = nullptr;  // [num_seqs + 1]
  const int32_t* seqlens_k = nullptr;     // [num_seqs] K/V length including this step's tokens
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  int num_seqs = 0;
  int max_seqlen_q = 0;  // host-side upper bound of q_len(s): sizes the grid
  int max_seqlen_k = 0;  // host-side upper bound of seqlens_k[s]: split heuristic, naive sizes
  int num_heads = 0;     // query heads; a multiple of num_kv_heads
  int num_kv_heads = 0;  // query head h reads KV head h / (num_heads / num_kv_heads)
  int head_dim = 0;
  int block_size = 0;
  int max_blocks_per_seq = 0;
  // Blocks in k_cache (and v_cache): the bounds of the Hopper prefill's TMA maps over the
  // cache. REQUIRED > 0 when that path runs (InvalidArgument otherwise).
  int64_t num_cache_blocks = 0;
  float softmax_scale = 0.f;  // usually 1/sqrt(head_dim)
  bool causal = true;
  // Keys a query may see, counting back from its own position (see the top of this file);
  // <= 0: no window (global attention). A plain per-call field so that a model can set it
  // per layer. Prefill and naive: W > 0 requires causal (InvalidArgument otherwise); decode
  // is causal by construction.
  int sliding_window = 0;
  // The output rounded as kernels::round_activations_q8 rounds a native GEMM's input, bit for
  // bit, as it is stored (the O projection's input, without a pass of its own): decode and
  // prefill. REQUIRES dtype bf16 and out 16-byte aligned (InvalidArgument otherwise);
  // attention_naive rejects it.
  bool round_q8_out = false;
  PrefillImpl prefill_impl = PrefillImpl::kAuto;  // prefill only
};

// Fused prefill. REQUIRES: q_len(s) <= seqlens_k[s] <= max_seqlen_k, q_len(s) <= max_seqlen_q.
// One pass over each row block's keys (num_splits 1, no workspace: a stream-K call then
// walks the counter, below).
absl::Status attention_prefill(const AttentionParams& p, cudaStream_t stream);

// The kernel attention_prefill(p, num_splits, ...) runs on a GPU of compute capability 9.0
// (is_hopper) or another: kAuto resolved by the choice table (kernels/attention/README.md) to
// kPortable, kHopper (the one-tile grid) or kHopperPersistent (unsplit; see PrefillImpl; past
// 1,024 keys only on a grid of more tiles than num_sms, where num_sms > 0, up to 4,096 keys,
// 16,384 at head_dim 64 causal without a window, 8,192 at head_dim 128 non-causal without a
// window when stream_k_workspace: the call gives attention_prefill_workspace_bytes(p, 1)); a
// pinned impl is itself on Hopper; elsewhere kPortable (attention_prefill rejects a pinned
// Hopper kernel there).
PrefillImpl attention_prefill_kernel_for(const AttentionParams& p, bool is_hopper,
                                         int num_splits, int num_sms = 0,
                                         bool stream_k_workspace = true);

// Split prefill (split-KV, as decode): the Hopper kernel runs one CTA an SM, so a call of few
// row blocks (a chunk of one sequence at few heads: SmolLM2's 9 heads x 3 row blocks of a
// 512-token chunk are 27 CTAs on 132 SMs) leaves most SMs idle; splitting each row block's key
// tiles num_splits ways fills them, and a combine kernel merges the fp32 partials by their
// LSE (kernels/attention/attention_combine.cuh). num_splits applies where the Hopper kernel
// runs; the portable kernel runs unsplit (the workspace then goes unused).
inline constexpr int kMaxPrefillSplits = 16;
// Splits for the call: 1 unless the one-tile Hopper kernel would run (kHopper, or kAuto's
// choice for the shape, the persistent form's shapes included: they split where the one-tile
// grid would; the device is not queried) with fewer row blocks than num_sms; then
// enough to cover the SMs once, at most one per 4 key tiles (512 keys) and kMaxPrefillSplits.
int attention_prefill_num_splits(const AttentionParams& p, int num_sms);
// Bytes of scratch for num_splits splits: fp32 partials of num_splits x num_seqs x
// max_seqlen_q x num_heads rows. num_splits == 1: 0, except for a call of head_dim 128 without
// the causal mask or a window and of more than 512 keys: the optional scratch of the
// persistent Hopper kernel's stream-K walk (its last round's tiles in key pieces over all the
// SMs, merged through fp32 partials: NOTES.md v31, v32), one slot a CTA, at most ~9 MB.
size_t attention_prefill_workspace_bytes(const AttentionParams& p, int num_splits);
// The most attention_prefill_workspace_bytes(p, attention_prefill_num_splits(p, num_sms)) can
// be for any call at this head_dim (the splits keep the grid within one wave).
size_t attention_prefill_workspace_bound(int head_dim, int num_sms);
// REQUIRES: 1 <= num_splits <= kMaxPrefillSplits; num_splits > 1: workspace_bytes >=
// attention_prefill_workspace_bytes(p, num_splits) (InvalidArgument otherwise). Unsplit, a
// workspace of that size lets such a call walk stream-K (without it the counter walk runs,
// 0.97-0.99x the stream-K walk at 1k-4k keys); a smaller one is not used.
absl::Status attention_prefill(const AttentionParams& p, int num_splits, void* workspace,
                               size_t workspace_bytes, cudaStream_t stream);

// Number of KV splits for decode: the fewest that give ~1.75 CTAs an SM (num_sms multiprocessors),
// never fewer than 4 K/V tiles (256 keys) per split, at most kMaxDecodeSplits. With a
// sliding window the splits share only the window's tiles, so pass it here too.
inline constexpr int kMaxDecodeSplits = 32;
int attention_decode_num_splits(int num_seqs, int num_kv_heads, int max_seqlen_k, int num_sms,
                                int sliding_window = 0);
// Bytes of scratch attention_decode needs for num_splits splits (0 when num_splits == 1).
size_t attention_decode_workspace_bytes(const AttentionParams& p, int num_splits);
// Decode: q and out are [num_seqs, num_heads, head_dim] (one query per sequence, which sees
// all seqlens_k[s] keys, or the last sliding_window of them; `causal` is irrelevant).
// num_heads / num_kv_heads must be <= 16.
// REQUIRES: workspace_bytes >= attention_decode_workspace_bytes(p, num_splits).
absl::Status attention_decode(const AttentionParams& p, int num_splits, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream);

// Unfused baseline; needs num_seqs * num_heads * max_seqlen_q * max_seqlen_k elements of the
// input dtype as scratch for S (P overwrites it in place).
size_t attention_naive_workspace_bytes(const AttentionParams& p);
absl::Status attention_naive(const AttentionParams& p, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream);

// The work of one attention call over num_seqs packed sequences, for benchmarks and metrics
// alike (the one formula both use). Sequence s has q_len(s) = cu_seqlens_q[s+1] -
// cu_seqlens_q[s] queries over seqlens_k[s] keys; with `causal`, query i sees
// seqlens_k - q_len + i + 1 keys, otherwise all of them; with sliding_window W > 0 (causal)
// at most W of them.
//   flops = 4 * head_dim * num_heads * (query, key) pairs attended  (QK^T and PV, 2 each)
//   bytes = element_bytes * head_dim * (2 * num_heads * queries + 2 * num_kv_heads * keys):
//           the minimum traffic, Q read and O written once, each K/V row that some query
//           sees read once (with a window: the last q_len + W - 1 keys at most).
struct AttentionCost {
  double flops = 0;
  double bytes = 0;
};
AttentionCost attention_cost(const int32_t* cu_seqlens_q, const int32_t* seqlens_k,
                             int num_seqs, int num_heads, int num_kv_heads, int head_dim,
                             int element_bytes, bool causal, int sliding_window = 0);

// Validation shared by the launchers (exposed for tests): InvalidArgument naming the value.
absl::Status validate_attention_params(const AttentionParams& p);

}  // namespace flashserve::kernels
