#pragma once
// Hopper (sm_90a) wgmma building blocks, used by the attention prefill kernel
// (kernels/attention/attention_prefill_sm90_ws.cuh) and the quantized GEMM
// (kernels/quant/quant_gemm_sm90.cu): the FLASHSERVE_SM90A guard, shared-memory matrix
// descriptors for the 128-byte swizzle, the accumulator fence and the shared-memory mbarrier
// operations of the warp-specialized kernels' rings; the wgmma instructions themselves are in
// kernels/wgmma_ops.cuh (generated).
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

// Named barriers (bar.sync / bar.arrive): `threads` of the CTA, a multiple of 32, meet at
// barrier `id` (1-15; 0 is __syncthreads'); arrive does not wait.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Shared-memory mbarriers (a full / empty pair per ring slot of a warp-specialized kernel):
// init with the arrival count of a phase, arrive, and wait until the phase of `parity`
// (0 for the first, then alternating) has completed.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Adds `bytes` to the transaction count the current phase waits for (no arrival): a TMA
// copy signalling the barrier (tma_load_2d) completes them.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
}
// An arrival on `bar` once every cp.async this thread issued so far has landed; .noinc: the
// barrier's init count includes these arrivals.
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// TMA: the box at element coordinates (c0 innermost, c1) of the tensor `map` describes into
// shared memory at dst (laid out, swizzled and zero-filled past the tensor's bounds as the
// map says), completing its bytes on mbarrier `bar`. `map` is a __grid_constant__ kernel
// parameter (or another global-memory address of a CUtensorMap).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int c0, int c1,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// TMA store: the box at (c0 innermost, c1) of `map` from shared memory at src (laid out and
// swizzled as the map says) into global memory, in this thread's bulk group; the source may
// be reused once tma_store_wait_read returns.
__device__ __forceinline__ void tma_store_2d(const void* map, int c0, int c1, uint32_t src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
}
// Commits this thread's TMA stores and waits until their sources have been read.
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

}  // namespace flashserve::kernels::device
