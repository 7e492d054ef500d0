// Host-side pieces shared by the attention launchers: parameter validation, the decode split
// heuristic and workspace sizes. (New K/V rows reach the cache through the production path's
// kernels::rope_qkv_append or gemv's kRopeAppend epilogue, kernels/layers.h and gemv.h.)
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_dispatch.cuh"
#include "kernels/cuda_plumbing.cuh"

namespace flashserve::kernels {
namespace {

absl::Status invalid(const char* what, int64_t value) {
  return absl::InvalidArgumentError(absl::StrCat("attention: ", what, " ", value));
}

}  // namespace

absl::Status validate_attention_params(const AttentionParams& p) {
  if (absl::Status s = device::check_head_dim(p.head_dim); !s.ok()) return s;
  if (p.dtype != DType::kBf16 && p.dtype != DType::kFp16) {
    return invalid("unsupported dtype", static_cast<int>(p.dtype));
  }
  if (p.num_seqs < 0 || p.num_seqs > kMaxGridYZ) {
    return invalid("num_seqs must be in [0, 65535] (a grid dimension), got", p.num_seqs);
  }
  if (p.num_heads <= 0 || p.num_heads > kMaxGridYZ) {
    return invalid("num_heads must be in [1, 65535] (a grid dimension), got", p.num_heads);
  }
  if (p.num_kv_heads <= 0 || p.num_heads % p.num_kv_heads != 0) {
    return invalid("num_heads must be a positive multiple of num_kv_heads, got num_kv_heads",
                   p.num_kv_heads);
  }
  if (p.block_size <= 0 || p.block_size % kAttentionKvTile != 0) {
    return invalid("block_size must be a positive multiple of 64 (the K/V tile), got",
                   p.block_size);
  }
  if (p.max_seqlen_q < 0) return invalid("max_seqlen_q must be >= 0, got", p.max_seqlen_q);
  if (p.max_seqlen_k < 0) return invalid("max_seqlen_k must be >= 0, got", p.max_seqlen_k);
  if (p.max_blocks_per_seq * int64_t{p.block_size} < p.max_seqlen_k) {
    return invalid("max_blocks_per_seq * block_size < max_seqlen_k, max_blocks_per_seq",
                   p.max_blocks_per_seq);
  }
  if (!(p.softmax_scale > 0.f) || p.softmax_scale > 1e30f) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention: softmax_scale must be positive and finite, got ",
                     p.softmax_scale));
  }
  if (p.num_seqs > 0 && (p.q == nullptr || p.k_cache == nullptr || p.v_cache == nullptr ||
                         p.out == nullptr || p.seqlens_k == nullptr ||
                         p.block_tables == nullptr)) {
    return absl::InvalidArgumentError("attention: a required pointer is null");
  }
  // Every kernel reads q and the K/V cache in 16-byte pieces (cp.async, TMA) and stores the
  // output in pairs of elements (4 bytes); a row is head_dim x 2 bytes, a multiple of 16, so
  // the base pointers' alignment is every row's. A misaligned pointer would fault on the GPU.
  const auto off = [](const void* ptr, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(ptr) % bytes;
  };
  if (p.num_seqs > 0 &&
      (off(p.q, 16) || off(p.k_cache, 16) || off(p.v_cache, 16) || off(p.out, 4))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention: q, k_cache and v_cache must be 16-byte aligned and out 4-byte aligned; got "
        "q % 16 = ", off(p.q, 16), ", k_cache % 16 = ", off(p.k_cache, 16),
        ", v_cache % 16 = ", off(p.v_cache, 16), ", out % 4 = ", off(p.out, 4)));
  }
  return absl::OkStatus();
}

int attention_decode_num_splits(int num_seqs, int num_kv_heads, int max_seqlen_k, int num_sms,
                                int sliding_window) {
  // A query's window spans at most W - 1 keys before it, which may straddle one more tile.
  if (sliding_window > 0) {
    max_seqlen_k = static_cast<int>(
        std::min<int64_t>(max_seqlen_k, int64_t{sliding_window} + kAttentionKvTile - 1));
  }
  // Decode is bound by reading K/V; one CTA per (sequence, KV head) leaves most SMs idle at
  // small batch. Split k until there are ~1.75 CTAs an SM (the fewest splits that reach it),
  // but keep >= 4 tiles per split so the combine and per-CTA start-up stay a small fraction.
  // Measured on the H200 (bench/attention/NOTES.md, 2026-12-04, `attention_bench --decode
  // --decode-splits=...`): the kernel streams best with few long splits once every SM has a
  // CTA or two; the former target of ~4 CTAs an SM cost 5-19 % at 16-64 sequences (b16 ctx4k
  // h9/3 d64: 11 splits 27 us, 5 splits 22 us; b16 ctx16k h32/8 d128: 5 splits 266 us, 2
  // splits 253 us), and a partial second wave cost more (b64 h9/3 d64: 3 splits slower than
  // both 2 and 4).
  constexpr int kTargetCtasPer4Sms = 7;
  constexpr int kMinTilesPerSplit = 4;
  const int64_t ctas = std::max<int64_t>(1, int64_t{num_seqs} * num_kv_heads);
  const int tiles = (max_seqlen_k + kAttentionKvTile - 1) / kAttentionKvTile;
  const int64_t target = (int64_t{kTargetCtasPer4Sms} * std::max(num_sms, 1) + 3) / 4;
  const int64_t want = (target + ctas - 1) / ctas;
  const int64_t cap = std::max(1, tiles / kMinTilesPerSplit);
  return static_cast<int>(std::clamp<int64_t>(want, 1, std::min<int64_t>(cap, kMaxDecodeSplits)));
}

size_t attention_decode_workspace_bytes(const AttentionParams& p, int num_splits) {
  if (num_splits <= 1) return 0;
  const size_t rows = size_t(num_splits) * p.num_seqs * p.num_heads;
  return rows * p.head_dim * sizeof(float) + rows * sizeof(float);
}

size_t attention_naive_workspace_bytes(const AttentionParams& p) {
  return size_t(p.num_seqs) * p.num_heads * p.max_seqlen_q * p.max_seqlen_k *
         dtype_bytes(p.dtype);
}

}  // namespace flashserve::kernels
