#pragma once
// Hopper (sm_90a) wgmma building blocks, today used by the attention prefill kernel
// (kernels/attention/attention_prefill_sm90_ws.cuh): the FLASHSERVE_SM90A guard, shared-memory
// matrix descriptors for the 128-byte swizzle and the accumulator fence; the wgmma instructions
// themselves are in kernels/wgmma_ops.cuh (generated).
//
// Shared-memory tiles use the layout wgmma's 128-byte swizzle mode expects: [head_dim / 64]
// column halves, each [rows][64] b16 with rows of 128 B and the 16-byte chunk index XOR-ed with
// row % 8; every tile starts 1024-byte aligned (the swizzle repeats every 8 rows = 1024 B).
// Descriptors: K-major (Q, K): SBO = 1024 B between 8-row groups, LBO unused; a 16-wide
// k-step advances the start address by 32 B inside the 128-B row, or jumps to the next half.
// N-major (V): LBO = distance between the two 64-column halves, SBO = 1024 B between groups of
// 8 keys. Tiles written through the generic proxy (cp.async) must be fenced to the async proxy
// (fence.proxy.async) before wgmma reads them.
#include <cstdint>

#include "kernels/mma_sync.cuh"
#include "kernels/wgmma_ops.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHSERVE_SM90A 1
#endif

namespace flashserve::kernels::device {

__device__ __forceinline__ uint64_t sw128_desc(const void* p, uint32_t lbo_bytes,
                                               uint32_t sbo_bytes) {
  return uint64_t((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32) | (uint64_t{1} << 62);
}

// Keeps the compiler from moving accesses of wgmma accumulators across the async window.
template <int N>
__device__ __forceinline__ void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

}  // namespace flashserve::kernels::device
