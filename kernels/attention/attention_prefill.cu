// Launchers of the fused prefill kernels: the portable mma.sync kernel
// (kernels/attention/attention_prefill.cuh) and the Hopper warp-specialized wgmma kernel
// (kernels/attention/attention_prefill_sm90_ws.cuh). Each is instantiated for {bf16, fp16} x
// head_dim {64, 128}; causal and the sliding window are runtime values (they only move the loop
// bounds and decide which tiles need the mask), so they cost no extra instantiation.
#include "absl/status/statusor.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_dispatch.cuh"
#include "kernels/attention/attention_prefill.cuh"
#include "kernels/attention/attention_prefill_sm90_ws.cuh"
#include "kernels/cuda_plumbing.cuh"
#include "kernels/device.h"

namespace flashserve::kernels {
namespace {

absl::StatusOr<bool> current_device_is_hopper() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return compute_capability(device) == 90;
}

// kAuto's choice on a Hopper GPU, from the measured grid (bench/attention/RESULTS.md and
// bench/attention/NOTES.md): at head_dim 128 the warp-specialized wgmma kernel is faster at
// every length; at head_dim 64 it wins from 512 queries without the causal mask, and with it
// once a query tile has many key tiles to walk: from 2048 queries (whole prompts), or from
// 1536 keys (a chunk of a long prompt: 512 queries after 1k-8k cached keys ran 1.15-1.79x the
// mma.sync kernel, the serving rows of NOTES.md 2026-12-02). Below that (whole causal prompts
// under 2048: grid s1024 0.98x, varlen 64-1024 0.97-0.99x) the mma.sync kernel with Q in
// registers is as fast or faster.
constexpr bool hopper_path_preferred(int head_dim, bool causal, int max_seqlen_q,
                                     int max_seqlen_k) {
  if (head_dim >= 128) return true;
  if (!causal) return max_seqlen_q >= 512;
  return max_seqlen_q >= 2048 || max_seqlen_k >= 1536;
}

// One smem limit per kernel instantiation (kernels/cuda_plumbing.cuh, set_smem_limit_once).
template <typename T, int kHeadDim, bool kHopper>
struct KernelTag {};

template <typename T, int kHeadDim>
absl::Status launch_hopper(const AttentionParams& p, cudaStream_t stream) {
  auto* kernel = device::attention_prefill_sm90_ws_kernel<T, kHeadDim>;
  const int smem = device::sm90ws_smem_bytes(kHeadDim);
  using Tag = KernelTag<T, kHeadDim, true>;
  if (absl::Status s = device::set_smem_limit_once<Tag>(kernel, smem); !s.ok()) return s;
  constexpr int kBlockM = device::sm90ws_block_m(kHeadDim);
  const dim3 grid((p.max_seqlen_q + kBlockM - 1) / kBlockM, p.num_heads, p.num_seqs);
  kernel<<<grid, device::sm90ws_threads(kHeadDim), smem, stream>>>(p);
  CUDA_CHECK(cudaGetLastError());
  return absl::OkStatus();
}

template <typename T, int kHeadDim>
absl::Status launch_portable(const AttentionParams& p, cudaStream_t stream) {
  auto* kernel = device::attention_prefill_kernel<T, kHeadDim>;
  const int smem = device::prefill_smem_bytes(kHeadDim);
  using Tag = KernelTag<T, kHeadDim, false>;
  if (absl::Status s = device::set_smem_limit_once<Tag>(kernel, smem); !s.ok()) return s;
  const dim3 grid((p.max_seqlen_q + device::prefill_block_m() - 1) / device::prefill_block_m(),
                  p.num_heads, p.num_seqs);
  kernel<<<grid, device::prefill_threads(), smem, stream>>>(p);
  CUDA_CHECK(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

absl::Status attention_prefill(const AttentionParams& p, cudaStream_t stream) {
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
  if (p.num_seqs == 0 || p.max_seqlen_q == 0) return absl::OkStatus();
  bool hopper = false;
  if (p.prefill_impl != PrefillImpl::kPortable) {
    absl::StatusOr<bool> is_hopper = current_device_is_hopper();
    if (!is_hopper.ok()) return is_hopper.status();
    if (p.prefill_impl == PrefillImpl::kHopper && !*is_hopper) {
      return absl::InvalidArgumentError(
          "attention_prefill: the Hopper path needs a compute capability 9.0 GPU");
    }
    hopper = *is_hopper;
  }
  return device::dispatch_dtype_head_dim(p.dtype, p.head_dim, [&](auto type_tag, auto dim_tag) {
    using T = typename decltype(type_tag)::type;
    constexpr int kHeadDim = decltype(dim_tag)::value;
    const bool use_hopper =
        hopper && (p.prefill_impl == PrefillImpl::kHopper ||
                   hopper_path_preferred(kHeadDim, p.causal, p.max_seqlen_q, p.max_seqlen_k));
    return use_hopper ? launch_hopper<T, kHeadDim>(p, stream)
                      : launch_portable<T, kHeadDim>(p, stream);
  });
}

}  // namespace flashserve::kernels
