// Launchers of the fused prefill kernels: the portable mma.sync kernel
// (kernels/attention_prefill.cuh) and the Hopper warp-specialized wgmma kernel
// (kernels/attention_prefill_sm90_ws.cuh). Each is instantiated for {bf16, fp16} x head_dim
// {64, 128}; causal is a runtime flag (it only moves the loop bound and decides which tiles
// need the mask), so it costs no extra instantiation.
#include "absl/status/statusor.h"
#include "kernels/attention.h"
#include "kernels/attention_dispatch.cuh"
#include "kernels/attention_prefill.cuh"
#include "kernels/attention_prefill_sm90_ws.cuh"

#include <cstdlib>
#include <cstring>
#include <string>

namespace flashserve::kernels {
namespace {

absl::StatusOr<bool> current_device_is_hopper() {
  int device = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
}

// kAuto's choice on a Hopper GPU, from the measured grid (bench/attention/RESULTS.md): the
// wgmma path wins at head_dim 128 (1.02-1.27x FA2 from s = 1k on, the mma.sync path
// 0.95-1.00x); at head_dim 64, with half the MMA work per softmax element, the mma.sync path
// (Q kept in registers) is as fast or faster at every length.
constexpr bool hopper_path_preferred(int head_dim) { return head_dim >= 128; }

// The Hopper kernel is the warp-specialized one (producer warpgroup, mbarrier rings, ping-pong
// consumers; kernels/attention_prefill_sm90_ws.cuh), at both head_dims. kAuto takes it at
// d128 only (hopper_path_preferred); at d64 it runs for kHopper. Measured (bench/attention/
// NOTES.md): d128 (v7, run 11) 1.19-1.44x the former v5 kernel, all tests pass; d64 (v8, 3
// consumer warpgroups, run 13) all tests pass, 1.29-1.47x v5 and 1.06-1.46x mma.sync, except
// causal s <= 1k (0.91-0.98x mma.sync); not kAuto's d64 choice (yet) because it is not faster
// on the whole grid and has not been under compute-sanitizer (NOTES.md v8). The v5 kernel and
// the no-ping-pong experiment (ws_nopp) were removed after v7/v8.
// FLASHSERVE_PREFILL_SM90 may still name the kernel: "ws" (or empty); any other value is an
// error, so that a script asking for a removed variant fails instead of measuring ws.
absl::Status check_sm90_kernel_choice() {
  const char* env = std::getenv("FLASHSERVE_PREFILL_SM90");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "ws") == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      std::string("attention_prefill: unknown FLASHSERVE_PREFILL_SM90=") + env +
      " (the only Hopper kernel is \"ws\"; v5 and ws_nopp were removed)");
}

template <typename T, int kHeadDim>
absl::Status launch_hopper(const AttentionParams& p, cudaStream_t stream) {
  if (absl::Status s = check_sm90_kernel_choice(); !s.ok()) return s;
  auto* kernel = device::attention_prefill_sm90_ws_kernel<T, kHeadDim>;
  const int smem = device::sm90ws_smem_bytes(kHeadDim);
  if (absl::Status s = device::set_smem_limit(kernel, smem); !s.ok()) return s;
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
  if (absl::Status s = device::set_smem_limit(kernel, smem); !s.ok()) return s;
  const dim3 grid((p.max_seqlen_q + device::prefill_block_m() - 1) / device::prefill_block_m(),
                  p.num_heads, p.num_seqs);
  kernel<<<grid, device::prefill_threads(), smem, stream>>>(p);
  CUDA_CHECK(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace

absl::Status attention_prefill(const AttentionParams& p, cudaStream_t stream) {
  if (absl::Status s = validate_attention_params(p); !s.ok()) return s;
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
        hopper && (p.prefill_impl == PrefillImpl::kHopper || hopper_path_preferred(kHeadDim));
    return use_hopper ? launch_hopper<T, kHeadDim>(p, stream)
                      : launch_portable<T, kHeadDim>(p, stream);
  });
}

}  // namespace flashserve::kernels
