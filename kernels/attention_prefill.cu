// Launcher of the fused prefill kernel (kernels/attention_prefill.cuh): 4 instantiations,
// {bf16, fp16} x head_dim {64, 128}; causal is a runtime flag (it only moves the loop bound
// and decides which tiles need the mask), so it costs no extra instantiation.
#include "kernels/attention.h"
#include "kernels/attention_dispatch.cuh"
#include "kernels/attention_prefill.cuh"

namespace flashserve::kernels {

absl::Status attention_prefill(const AttentionParams& p, cudaStream_t stream) {
  if (absl::Status s = validate_attention_params(p); !s.ok()) return s;
  if (p.cu_seqlens_q == nullptr) {
    return absl::InvalidArgumentError("attention_prefill: cu_seqlens_q is null");
  }
  if (p.num_seqs == 0 || p.max_seqlen_q == 0) return absl::OkStatus();
  return device::dispatch_dtype_head_dim(p.dtype, p.head_dim, [&](auto type_tag, auto dim_tag) {
    using T = typename decltype(type_tag)::type;
    constexpr int kHeadDim = decltype(dim_tag)::value;
    auto* kernel = device::attention_prefill_kernel<T, kHeadDim>;
    const int smem = device::prefill_smem_bytes(kHeadDim);
    if (absl::Status s = device::set_smem_limit(kernel, smem); !s.ok()) return s;
    const dim3 grid((p.max_seqlen_q + device::prefill_block_m() - 1) / device::prefill_block_m(),
                    p.num_heads, p.num_seqs);
    kernel<<<grid, device::prefill_threads(), smem, stream>>>(p);
    CUDA_CHECK(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace flashserve::kernels
