// Launcher of split-KV decode (kernels/attention/attention_decode.cuh): {bf16, fp16} x head_dim
// {64, 128}, plus the combine kernel when the work is split.
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_decode.cuh"
#include "kernels/attention/attention_dispatch.cuh"
#include "kernels/cuda_plumbing.cuh"
#include "kernels/dependent_launch.cuh"

namespace flashserve::kernels {

absl::Status attention_decode(const AttentionParams& p, int num_splits, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  if (absl::Status s = validate_attention_params(p); !s.ok()) return s;
  if (p.num_heads / p.num_kv_heads > 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention_decode: unsupported GQA group of ", p.num_heads / p.num_kv_heads,
        " query heads per KV head (at most 16: one MMA tile)"));
  }
  if (p.round_q8_out &&
      (p.dtype != DType::kBf16 || reinterpret_cast<uintptr_t>(p.out) % 16 != 0)) {
    return absl::InvalidArgumentError(
        "attention_decode: round_q8_out needs a bf16 output, 16-byte aligned");
  }
  if (num_splits < 1 || num_splits > kMaxDecodeSplits) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_decode: num_splits ", num_splits, " out of [1, ",
                     kMaxDecodeSplits, "]"));
  }
  const size_t need = attention_decode_workspace_bytes(p, num_splits);
  if (workspace_bytes < need || (need > 0 && workspace == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("attention_decode: workspace of ",
                                                   workspace_bytes, " bytes, need ", need));
  }
  if (p.num_seqs == 0) return absl::OkStatus();
  float* o_partial = static_cast<float*>(workspace);
  float* lse_partial =
      num_splits > 1 ? o_partial + size_t(num_splits) * p.num_seqs * p.num_heads * p.head_dim
                     : nullptr;
  return device::dispatch_dtype_head_dim(p.dtype, p.head_dim, [&](auto type_tag, auto dim_tag) {
    using T = typename decltype(type_tag)::type;
    constexpr int kHeadDim = decltype(dim_tag)::value;
    auto* kernel = device::attention_decode_kernel<T, kHeadDim>;
    const int smem = device::decode_smem_bytes(kHeadDim);
    if (absl::Status s = device::set_smem_limit(kernel, smem); !s.ok()) return s;
    const dim3 grid(num_splits, p.num_kv_heads, p.num_seqs);
    CUDA_CHECK(device::launch_dependent(kernel, grid, device::decode_threads(), smem, stream, p,
                                        num_splits, o_partial, lse_partial));
    if (num_splits > 1) {
      CUDA_CHECK(device::launch_dependent(device::attention_decode_combine_kernel<T, kHeadDim>,
                                          p.num_seqs * p.num_heads, kHeadDim, 0, stream, p,
                                          num_splits, o_partial,
                                          static_cast<const float*>(lse_partial)));
    }
    return absl::OkStatus();
  });
}

}  // namespace flashserve::kernels
