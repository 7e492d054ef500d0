// Launchers of the fused prefill kernels: the portable mma.sync kernel
// (kernels/attention/attention_prefill.cuh) and the Hopper warp-specialized wgmma kernel
// (kernels/attention/attention_prefill_sm90_ws.cuh). Each is instantiated for {bf16, fp16} x
// head_dim {64, 128}; causal and the sliding window are runtime values (they only move the loop
// bounds and decide which tiles need the mask), so they cost no extra instantiation.
#include <cuda.h>  // CUtensorMap

#include <algorithm>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_combine.cuh"
#include "kernels/attention/attention_dispatch.cuh"
#include "kernels/attention/attention_prefill.cuh"
#include "kernels/attention/attention_prefill_sm90_ws.cuh"
#include "kernels/cuda_plumbing.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/device.h"
#include "kernels/tensor_map.h"

namespace flashserve::kernels {
namespace {

absl::StatusOr<bool> current_device_is_hopper() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return compute_capability(device) == 90;
}

// kAuto's choice on a Hopper GPU, from the measured grid (bench/attention/RESULTS.md and
// bench/attention/NOTES.md): at head_dim 128 the warp-specialized wgmma kernel is faster at
// every length; at head_dim 64 it wins from 512 queries, and with the causal mask also for a
// shorter chunk of a long prompt (from 1536 keys: the serving rows). Since each consumer
// warpgroup skips the key tiles wholly masked for its rows (v18 in NOTES.md) it runs 1.02x
// the mma.sync kernel at d64 causal s512 and 1.17x at s1024 (H100).
constexpr bool hopper_path_preferred(int head_dim, bool causal, int max_seqlen_q,
                                     int max_seqlen_k) {
  if (head_dim >= 128) return true;
  return max_seqlen_q >= 512 || (causal && max_seqlen_k >= 1536);
}

// The stream-K walk (v31, v32; kernels/attention/attention_prefill_sm90_ws.cuh): the calls it
// runs, given the workspace for its slots: head_dim 128, non-causal, no window, more than 512
// keys. Measured on an H100 against the head's kAuto kernel (three alternating rounds, NOTES.md
// v31 outcome): the d128 full rows of 1k-8k keys 1.03-1.05x (the last partial round's idle
// SMs), s512 0.97x (the pieces' hand-over costs more than the short tail), d64 full 0.96-1.05x
// (1k 0.97x: its rounds are the static walk's, which lose to the counter walk there).
// The one-tile grid's CTAs: row blocks x heads x sequences (the persistent form's tiles).
int64_t hopper_tiles(const AttentionParams& p) {
  const int64_t block_m = device::sm90ws_block_m(p.head_dim);
  return (p.max_seqlen_q + block_m - 1) / block_m * int64_t{p.num_heads} * p.num_seqs;
}

bool stream_k_walks(const AttentionParams& p) {
  return p.head_dim == 128 && !p.causal && p.sliding_window <= 0 && p.max_seqlen_k > 512;
}

// The persistent form's walk (kernels/attention/attention_prefill_sm90_ws.cuh), kAuto's and a
// pinned kHopperPersistent's alike: stream-K where it runs and the workspace was given, else by
// the call's keys. Measured on an H100 in five alternating rounds (NOTES.md v27 re-test): at
// s512 the static walk ran 1.02-1.03x the counter walk on two of the four grid rows (the other
// two even); from 513 to 1,024 keys, where the static walk had lost to the one-tile grid (v25),
// the counter walk ran 1.06-1.12x the one-tile grid, and the varlen batch of at most 1,024 keys
// 1.12-1.21x.
device::Sm90Walk hopper_persistent_walk(const AttentionParams& p, int num_sms,
                                        bool stream_k_workspace) {
  if (stream_k_walks(p) && stream_k_workspace && num_sms <= device::kSm90SkMaxCtas) {
    return device::Sm90Walk::kStreamK;
  }
  return p.max_seqlen_k <= 512 ? device::Sm90Walk::kStatic : device::Sm90Walk::kCounter;
}

// The longest call (keys) of kAuto's persistent class past 1,024 keys, by (head_dim, mask,
// walk). Past 4,096 keys the class grew where rule_long.py (NOTES.md v34, written before the
// call) found the persistent form ahead of the one-tile grid in 7 runs on an H100 (wgmma ms /
// wgmma_ps ms, median): d64 causal 8k / 16k 1.030 / 1.011 (its b8 chunk rows of 4,608 and 8,704
// keys 1.017-1.030: the counter walk); d128 full 8k 1.026 (the stream-K walk; 16k 0.984 stops
// it). The others stop at 4,096: d64 full 8k 0.948, d128 causal 8k 0.999. A window keeps 4,096
// (not measured past it), as does a d128 full call without the stream-K workspace (its counter
// walk not measured past it).
int persistent_max_keys(const AttentionParams& p, int num_sms, bool stream_k_workspace) {
  if (p.sliding_window > 0) return 4096;
  if (p.head_dim == 64 && p.causal) return 16384;
  if (hopper_persistent_walk(p, num_sms, stream_k_workspace) == device::Sm90Walk::kStreamK) {
    return 8192;
  }
  return 4096;
}

// Where kAuto runs the Hopper kernel, its persistent form (one CTA an SM walks the tiles,
// the next tile's Q and first K/V loaded while the current one finishes) for calls of at most
// persistent_max_keys: there a tile's CTA is short (~12 us at s512) and its start a large part
// of it, and the last partial round leaves SMs idle. Measured on an H100 (NOTES.md v31 outcome,
// v32 and v33; alternating rounds): the counter walk ran 1.00-1.07x the one-tile grid on the
// grid rows of 2k-4k keys (d64 full 1.04 / 1.03, causal 1.07 / 1.04; d128 full 1.01 / 1.00,
// causal 1.04 / 1.03); the stream-K walk ran the d128 full rows of 1k-4k 1.02-1.06x. Past 1,024
// keys only on a grid of more tiles than SMs: with fewer, each CTA walks one tile and the form
// is only its cost (the b1 chunk rows of 32 heads, unsplit at 96-128 tiles: 0.95-0.97x the
// one-tile grid, RESULTS.md of session 48). num_sms 0: not known, as if more. Longer calls keep
// the one-tile grid (and its split for short grids).
bool hopper_persistent_preferred(const AttentionParams& p, int num_sms, bool stream_k_workspace) {
  if (p.max_seqlen_k <= 1024) return true;
  if (num_sms > 0 && hopper_tiles(p) <= num_sms) return false;
  return p.max_seqlen_k <= persistent_max_keys(p, num_sms, stream_k_workspace);
}

// kStreamK's slots: one a CTA of the persistent grid (min(tiles, SMs) <= kSm90SkMaxCtas).
size_t stream_k_bytes(const AttentionParams& p) {
  return size_t(std::min<int64_t>(hopper_tiles(p), device::kSm90SkMaxCtas)) *
         device::sm90ws_sk_slot_floats(p.head_dim) * sizeof(float);
}

// The TMA map of a paged K or V cache seen as rows [num_cache_blocks x num_kv_heads x
// block_size, head_dim] of 2-byte elements (kernels/paged_kv.h: a (block, kv head) is
// block_size contiguous rows): boxes of 64 rows x 64 columns in the 128-byte swizzle that the
// consumers' wgmma descriptors read (one column panel of a half K/V tile).
absl::Status cache_tensor_map(const void* cache, const AttentionParams& p, CUtensorMap* map) {
  TensorMap2d t;
  t.base = cache;
  t.type = CU_TENSOR_MAP_DATA_TYPE_UINT16;
  t.rows = static_cast<uint64_t>(p.num_cache_blocks) * p.num_kv_heads * p.block_size;
  t.cols = static_cast<uint64_t>(p.head_dim);
  t.row_bytes = t.cols * 2;
  t.box_rows = t.box_cols = 64;
  t.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  return encode_tensor_map_2d(t, "attention_prefill: the K/V cache", map);
}

// The TMA map of the output [rows, num_heads x head_dim] (2-byte elements) for the Hopper
// kernel's stores of whole 64-row blocks: boxes of 64 rows x 64 columns in the 128-byte
// swizzle of its staging. Rows: num_seqs x max_seqlen_q bounds the tokens (only whole blocks
// of a sequence's rows are stored, so the bound never clips).
absl::Status output_tensor_map(const AttentionParams& p, CUtensorMap* map) {
  TensorMap2d t;
  t.base = p.out;
  t.type = CU_TENSOR_MAP_DATA_TYPE_UINT16;
  t.rows = static_cast<uint64_t>(p.num_seqs) * p.max_seqlen_q;
  t.cols = static_cast<uint64_t>(p.num_heads) * p.head_dim;
  t.row_bytes = t.cols * 2;
  t.box_rows = t.box_cols = 64;
  t.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  return encode_tensor_map_2d(t, "attention_prefill: the output", map);
}

// One smem limit per kernel instantiation (kernels/cuda_plumbing.cuh, set_smem_limit_once).
// kKernel: 0 the portable kernel, 1 the Hopper kernel, 2 its split instantiation, 3 and 4
// its persistent ones (static and counter walks).
template <typename T, int kHeadDim, int kKernel>
struct KernelTag {};

// Split prefill's partials in the workspace: o [splits][seqs][max_seqlen_q][heads][head_dim]
// then lse [splits][seqs][max_seqlen_q][heads], fp32.
size_t prefill_partial_rows(const AttentionParams& p, int num_splits) {
  return size_t(num_splits) * p.num_seqs * p.max_seqlen_q * p.num_heads;
}

// kSplit: the split instantiation (num_splits > 1) and its combine. kWalk other than
// kOneTile: one CTA of the num_sms SMs (at most one a tile) walks the tiles.
template <typename T, int kHeadDim, bool kSplit,
          device::Sm90Walk kWalk = device::Sm90Walk::kOneTile>
absl::Status launch_hopper(const AttentionParams& p, int num_splits, void* workspace,
                           cudaStream_t stream, int num_sms = 0) {
  constexpr bool kPersistent = kWalk != device::Sm90Walk::kOneTile;
  auto* kernel = device::attention_prefill_sm90_ws_kernel<T, kHeadDim, kSplit, kWalk>;
  const int smem = device::sm90ws_smem_bytes(kHeadDim, kPersistent);
  using Tag = KernelTag<T, kHeadDim,
                        kWalk == device::Sm90Walk::kStreamK  ? 5
                        : kWalk == device::Sm90Walk::kCounter  ? 4
                        : kWalk == device::Sm90Walk::kStatic ? 3
                        : kSplit                             ? 2
                                                             : 1>;
  if (absl::Status s = device::set_smem_limit_once<Tag>(kernel, smem); !s.ok()) return s;
  // The maps' bounds; TMA row coordinates are 32-bit (validate_attention_params already
  // holds block_size to a multiple of 64, one half tile's box).
  const int64_t cache_rows = p.num_cache_blocks * p.num_kv_heads * int64_t{p.block_size};
  if (p.num_cache_blocks <= 0 || cache_rows > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention_prefill: the Hopper path needs num_cache_blocks > 0 with at most 2^31 - 1 "
        "cache rows (blocks x kv heads x block_size); got num_cache_blocks ",
        p.num_cache_blocks));
  }
  CUtensorMap k_map, v_map, o_map = {};
  if (absl::Status s = cache_tensor_map(p.k_cache, p, &k_map); !s.ok()) return s;
  if (absl::Status s = cache_tensor_map(p.v_cache, p, &v_map); !s.ok()) return s;
  // (A TMA store needs a 16-byte aligned output; another output is stored from registers.)
  const bool o_by_tma = num_splits == 1 && reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
  if (o_by_tma) {
    if (absl::Status s = output_tensor_map(p, &o_map); !s.ok()) return s;
  }
  constexpr int kBlockM = device::sm90ws_block_m(kHeadDim);
  float* o_partial = kSplit || kWalk == device::Sm90Walk::kStreamK ? static_cast<float*>(workspace)
                                                                    : nullptr;
  float* lse_partial =
      kSplit ? o_partial + prefill_partial_rows(p, num_splits) * kHeadDim : nullptr;
  dim3 grid((p.max_seqlen_q + kBlockM - 1) / kBlockM * num_splits, p.num_heads, p.num_seqs);
  if constexpr (kPersistent) {
    const int64_t tiles = int64_t{grid.x} * grid.y * grid.z;
    grid = dim3(static_cast<unsigned>(std::min<int64_t>(tiles, std::max(num_sms, 1))), 1, 1);
  }
  kernel<<<grid, device::sm90ws_threads(kHeadDim), smem, stream>>>(
      p, k_map, v_map, o_map, o_by_tma, num_splits, o_partial, lse_partial);
  CUDA_CHECK(cudaGetLastError());
  if constexpr (kSplit) {
    const dim3 combine_grid(p.max_seqlen_q * p.num_heads, p.num_seqs);
    CUDA_CHECK(device::launch_dependent(device::attention_prefill_combine_kernel<T, kHeadDim>,
                                        combine_grid, kHeadDim, 0, stream, p, num_splits,
                                        static_cast<const float*>(o_partial),
                                        static_cast<const float*>(lse_partial)));
  }
  return absl::OkStatus();
}

template <typename T, int kHeadDim>
absl::Status launch_portable(const AttentionParams& p, cudaStream_t stream) {
  auto* kernel = device::attention_prefill_kernel<T, kHeadDim>;
  const int smem = device::prefill_smem_bytes(kHeadDim);
  using Tag = KernelTag<T, kHeadDim, 0>;
  if (absl::Status s = device::set_smem_limit_once<Tag>(kernel, smem); !s.ok()) return s;
  const dim3 grid((p.max_seqlen_q + device::prefill_block_m() - 1) / device::prefill_block_m(),
                  p.num_heads, p.num_seqs);
  kernel<<<grid, device::prefill_threads(), smem, stream>>>(p);
  CUDA_CHECK(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

PrefillImpl attention_prefill_kernel_for(const AttentionParams& p, bool is_hopper,
                                         int num_splits, int num_sms, bool stream_k_workspace) {
  if (!is_hopper || p.prefill_impl == PrefillImpl::kPortable) return PrefillImpl::kPortable;
  if (p.prefill_impl != PrefillImpl::kAuto) return p.prefill_impl;
  if (!hopper_path_preferred(p.head_dim, p.causal, p.max_seqlen_q, p.max_seqlen_k)) {
    return PrefillImpl::kPortable;
  }
  return num_splits == 1 && hopper_persistent_preferred(p, num_sms, stream_k_workspace)
             ? PrefillImpl::kHopperPersistent
             : PrefillImpl::kHopper;
}

int attention_prefill_num_splits(const AttentionParams& p, int num_sms) {
  if (p.num_seqs <= 0 || p.max_seqlen_q <= 0 || (p.head_dim != 64 && p.head_dim != 128)) {
    return 1;
  }
  // Only the one-tile grid splits: not the portable kernel, not a pinned persistent form.
  // Where kAuto would pick the persistent form (hopper_persistent_preferred) the one-tile grid's count
  // decides: a grid under one wave keeps its split (the persistent form cannot split, and
  // with fewer tiles than SMs it walks one tile a CTA), and attention_prefill_kernel_for then
  // gives the persistent form only the unsplit calls.
  const PrefillImpl impl =
      attention_prefill_kernel_for(p, /*is_hopper=*/true, /*num_splits=*/1, num_sms);
  if (impl == PrefillImpl::kPortable || p.prefill_impl == PrefillImpl::kHopperPersistent) {
    return 1;
  }
  // The Hopper kernel runs one CTA an SM (its registers fill the SM); a grid of fewer CTAs
  // than SMs leaves the rest idle for the whole call, and each CTA's time is its row block's
  // key tiles. Split those tiles so that the grid covers the SMs once (not more: a second,
  // partial wave would cost a whole CTA's time), keeping >= 4 tiles (512 keys) a split so
  // that a split's Q load, pipeline fill and epilogue stay a small part of it.
  constexpr int kMinTilesPerSplit = 4;
  const int block_m = device::sm90ws_block_m(p.head_dim);
  const int64_t ctas = hopper_tiles(p);
  if (ctas >= num_sms) return 1;
  // A row block walks at most the keys its rows see: with a window, W - 1 before its first
  // row to its last row, plus a tile of misalignment.
  int64_t keys = p.max_seqlen_k;
  if (p.sliding_window > 0) {
    keys = std::min<int64_t>(keys, int64_t{p.sliding_window} + block_m + device::sm90ws_block_n());
  }
  const int64_t tiles = (keys + device::sm90ws_block_n() - 1) / device::sm90ws_block_n();
  const int64_t cap = std::max<int64_t>(1, tiles / kMinTilesPerSplit);
  return static_cast<int>(
      std::clamp<int64_t>(num_sms / ctas, 1, std::min<int64_t>(cap, kMaxPrefillSplits)));
}

size_t attention_prefill_workspace_bytes(const AttentionParams& p, int num_splits) {
  if (num_splits <= 1) {
    const bool shaped = p.num_seqs > 0 && p.max_seqlen_q > 0 && p.num_heads > 0;
    return shaped && stream_k_walks(p) ? stream_k_bytes(p) : 0;
  }
  return prefill_partial_rows(p, num_splits) * (p.head_dim + 1) * sizeof(float);
}

size_t attention_prefill_workspace_bound(int head_dim, int num_sms) {
  // attention_prefill_num_splits keeps splits x ctas <= num_sms with ctas >= num_seqs x
  // max_seqlen_q x num_heads / block_m, so the partial rows are at most num_sms x block_m;
  // the stream-K slots (head_dim 128 only) are at most kSm90SkMaxCtas.
  const int block_m = device::sm90ws_block_m(head_dim);
  const size_t split = size_t(std::max(num_sms, 0)) * block_m * (head_dim + 1) * sizeof(float);
  if (head_dim != 128) return split;
  return std::max(split, size_t{device::kSm90SkMaxCtas} *
                             device::sm90ws_sk_slot_floats(head_dim) * sizeof(float));
}

absl::Status attention_prefill(const AttentionParams& p, cudaStream_t stream) {
  return attention_prefill(p, 1, nullptr, 0, stream);
}

absl::Status attention_prefill(const AttentionParams& p, int num_splits, void* workspace,
                               size_t workspace_bytes, cudaStream_t stream) {
  if (absl::Status s = validate_attention_params(p); !s.ok()) return s;
  if (p.round_q8_out &&
      (p.dtype != DType::kBf16 || reinterpret_cast<uintptr_t>(p.out) % 16 != 0)) {
    return absl::InvalidArgumentError(
        "attention_prefill: round_q8_out needs a bf16 output, 16-byte aligned");
  }
  if (absl::Status s = device::check_window_is_causal(p, "attention_prefill"); !s.ok()) return s;
  if (p.cu_seqlens_q == nullptr) {
    return absl::InvalidArgumentError("attention_prefill: cu_seqlens_q is null");
  }
  if (num_splits < 1 || num_splits > kMaxPrefillSplits) {
    return absl::InvalidArgumentError(absl::StrCat("attention_prefill: num_splits ", num_splits,
                                                   " out of [1, ", kMaxPrefillSplits, "]"));
  }
  // (Unsplit, the workspace is optional: without it a non-causal call walks as a causal one.)
  const size_t need = attention_prefill_workspace_bytes(p, num_splits);
  const bool has_need = workspace != nullptr && workspace_bytes >= need;
  if (num_splits > 1 && !has_need) {
    return absl::InvalidArgumentError(absl::StrCat("attention_prefill: workspace of ",
                                                   workspace_bytes, " bytes, need ", need));
  }
  if (p.num_seqs == 0 || p.max_seqlen_q == 0) return absl::OkStatus();
  bool hopper = false;
  if (p.prefill_impl != PrefillImpl::kPortable) {
    absl::StatusOr<bool> is_hopper = current_device_is_hopper();
    if (!is_hopper.ok()) return is_hopper.status();
    if ((p.prefill_impl == PrefillImpl::kHopper ||
         p.prefill_impl == PrefillImpl::kHopperPersistent) && !*is_hopper) {
      return absl::InvalidArgumentError(
          "attention_prefill: the Hopper path needs a compute capability 9.0 GPU");
    }
    hopper = *is_hopper;
  }
  int sms = 0;  // (Hopper: the persistent form's class and grid)
  if (hopper) {
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    sms = multiprocessor_count(dev);
  }
  return device::dispatch_dtype_head_dim(p.dtype, p.head_dim, [&](auto type_tag, auto dim_tag) {
    using T = typename decltype(type_tag)::type;
    constexpr int kHeadDim = decltype(dim_tag)::value;
    const PrefillImpl impl =
        attention_prefill_kernel_for(p, hopper, num_splits, sms, has_need && need > 0);
    if (impl == PrefillImpl::kPortable) return launch_portable<T, kHeadDim>(p, stream);
    if (impl == PrefillImpl::kHopperPersistent) {
      if (num_splits > 1) {
        return absl::InvalidArgumentError(
            "attention_prefill: the persistent Hopper kernel runs unsplit (num_splits 1)");
      }
      switch (hopper_persistent_walk(p, sms, has_need && need > 0)) {
        case device::Sm90Walk::kStreamK:
          return launch_hopper<T, kHeadDim, false, device::Sm90Walk::kStreamK>(p, 1, workspace,
                                                                              stream, sms);
        case device::Sm90Walk::kStatic:
          return launch_hopper<T, kHeadDim, false, device::Sm90Walk::kStatic>(p, 1, workspace,
                                                                             stream, sms);
        default:
          return launch_hopper<T, kHeadDim, false, device::Sm90Walk::kCounter>(p, 1, workspace,
                                                                              stream, sms);
      }
    }
    return num_splits > 1 ? launch_hopper<T, kHeadDim, true>(p, num_splits, workspace, stream)
                          : launch_hopper<T, kHeadDim, false>(p, num_splits, workspace, stream);
  });
}

}  // namespace flashserve::kernels
