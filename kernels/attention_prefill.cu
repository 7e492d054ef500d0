// Launchers of the fused prefill kernels: the portable mma.sync kernel
// (kernels/attention_prefill.cuh) and the Hopper wgmma kernel
// (kernels/attention_prefill_sm90.cuh). Each is instantiated for {bf16, fp16} x head_dim
// {64, 128}; causal is a runtime flag (it only moves the loop bound and decides which tiles
// need the mask), so it costs no extra instantiation.
#include "absl/status/statusor.h"
#include "kernels/attention.h"
#include "kernels/attention_dispatch.cuh"
#include "kernels/attention_prefill.cuh"
#include "kernels/attention_prefill_sm90.cuh"
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

// Which Hopper kernel runs: the warp-specialized one (producer warpgroup, mbarrier rings,
// ping-pong consumers; kernels/attention_prefill_sm90_ws.cuh) or the v5 kernel
// (kernels/attention_prefill_sm90.cuh). FLASHSERVE_PREFILL_SM90=ws|ws_nopp|v5 overrides the
// per-head_dim default (the tests run them explicitly). ws_nopp is built at head_dim 128 only.
// Measured (bench/attention/NOTES.md v7, run 11): ws 1.19-1.44x v5 at d128, all tests pass.
// d64 (v8, 3 consumer warpgroups, run 13): all tests pass, 1.29-1.47x v5 and 1.06-1.46x
// mma.sync, except causal s <= 1k (0.91-0.98x mma.sync); not the default at d64 (yet) because
// it is not faster on the whole grid and has not been under compute-sanitizer (NOTES.md v8).
constexpr bool sm90_warp_specialized_default(int head_dim) { return head_dim == 128; }
// 0 = v5 kernel, 1 = warp-specialized, 2 = warp-specialized without ping-pong (experiment).
int sm90_kernel_choice(int head_dim) {
  const char* env = std::getenv("FLASHSERVE_PREFILL_SM90");
  if (env == nullptr || *env == '\0') return sm90_warp_specialized_default(head_dim) ? 1 : 0;
  if (std::strcmp(env, "ws") == 0) return 1;
  if (std::strcmp(env, "ws_nopp") == 0) return 2;
  return 0;
}

template <typename T, int kHeadDim, bool kPingPong>
absl::Status launch_hopper_ws(const AttentionParams& p, cudaStream_t stream) {
  auto* kernel = device::attention_prefill_sm90_ws_kernel<T, kHeadDim, kPingPong>;
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

template <typename T, int kHeadDim>
absl::Status launch_hopper(const AttentionParams& p, cudaStream_t stream) {
  const int choice = sm90_kernel_choice(kHeadDim);
  if (choice == 1) return launch_hopper_ws<T, kHeadDim, true>(p, stream);
  if (choice == 2) {
    if constexpr (kHeadDim == 128) {
      return launch_hopper_ws<T, kHeadDim, false>(p, stream);
    } else {  // not instantiated at d64 (build time)
      return absl::UnimplementedError(
          "attention_prefill: FLASHSERVE_PREFILL_SM90=ws_nopp is built for head_dim 128 only, "
          "not head_dim " + std::to_string(kHeadDim));
    }
  }
  auto* kernel = device::attention_prefill_sm90_kernel<T, kHeadDim>;
  const int smem = device::sm90_smem_bytes(kHeadDim);
  if (absl::Status s = device::set_smem_limit(kernel, smem); !s.ok()) return s;
  constexpr int kBlockM = device::sm90_block_m(kHeadDim);
  const dim3 grid((p.max_seqlen_q + kBlockM - 1) / kBlockM, p.num_heads, p.num_seqs);
  kernel<<<grid, device::sm90_threads(kHeadDim), smem, stream>>>(p);
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
