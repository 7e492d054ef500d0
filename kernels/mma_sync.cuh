#pragma once
// The sm_80 tensor-core building blocks that more than one kernel family uses (the attention
// kernels, the quantized GEMM of kernels/quant/): mma.sync m16n8k16 with fp32 accumulation,
// ldmatrix, cp.async and the XOR-swizzled shared-memory row layout they read. Host code never
// includes this file.
//
// Fragment layouts of mma.sync.m16n8k16 (g = lane / 4, t = lane % 4), as the PTX ISA defines:
//   A (16x16, row-major) a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..)
//   B (16x8,  "col")     b0: (k=2t..2t+1, n=g)   b1: (k=2t+8.., n=g)
//   C (16x8,  fp32)      c0,c1: (g, 2t..2t+1)    c2,c3: (g+8, 2t..2t+1)
// ldmatrix_x4 on a [rows][cols] b16 tile (lane l giving row l % 16, column 8 (l / 16)) yields
// exactly an A fragment; on a [n][k] tile it yields the B fragments of two n-tiles.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace flashserve::kernels::device {

// d += a * b for one 16x8x16 tile; T selects the bf16 or fp16 instruction.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// 16-byte global -> shared copy that bypasses L1 (.cg); src_bytes = 0 zero-fills the
// destination without reading src (used for rows past the end of a sequence, so that
// whatever the cache holds there, even NaN, never meets a zero probability in PV).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Shared-memory tiles are [rows][kCols] b16 with the 16-byte chunk index XOR-ed by
// (row % 8). ldmatrix reads 8 rows at the same logical column; without the swizzle those
// 8 x 16 B land in the same 4 banks (row pitch 128 or 256 B is a multiple of 128 B), an
// 8-way conflict; with it they cover all 32 banks. cp.async writes stay conflict-free.
template <int kCols>
__device__ __forceinline__ int swizzle(int row, int col) {
  static_assert(kCols % 64 == 0, "the swizzle needs at least 8 chunks of 16 B per row");
  const int chunk = (col >> 3) ^ (row & 7);
  return row * kCols + (chunk << 3) + (col & 7);
}

}  // namespace flashserve::kernels::device
