#pragma once
// Device building blocks shared by the attention kernels: the sm_80 tensor-core instruction
// (mma.sync m16n8k16, fp32 accumulate), ldmatrix, cp.async and the swizzled shared-memory tile
// layout (dtype traits and error checks: kernels/cuda_plumbing.cuh). Host code never includes
// this file.
//
// Fragment layouts of mma.sync.m16n8k16 (g = lane / 4, t = lane % 4), as the PTX ISA defines:
//   A (16x16, row-major) a0: (g, 2t..2t+1)  a1: (g+8, 2t..)  a2: (g, 2t+8..)  a3: (g+8, 2t+8..)
//   B (16x8,  "col")     b0: (k=2t..2t+1, n=g)   b1: (k=2t+8.., n=g)
//   C (16x8,  fp32)      c0,c1: (g, 2t..2t+1)    c2,c3: (g+8, 2t..2t+1)
// The C layout of two adjacent 8-key n-tiles equals the A layout of one 16-key k-step, which
// is what lets P go from the softmax straight into the PV product without shared memory.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda_plumbing.cuh"

namespace flashserve::kernels::device {

inline constexpr float kLog2e = 1.4426950408889634f;

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

// Shared-memory tiles are [rows][kHeadDim] b16 with the 16-byte chunk index XOR-ed by
// (row % 8). ldmatrix reads 8 rows at the same logical column; without the swizzle those
// 8 x 16 B land in the same 4 banks (row pitch 128 or 256 B is a multiple of 128 B), an
// 8-way conflict; with it they cover all 32 banks. cp.async writes stay conflict-free.
template <int kHeadDim>
__device__ __forceinline__ int swizzle(int row, int col) {
  static_assert(kHeadDim % 64 == 0, "the swizzle needs at least 8 chunks of 16 B per row");
  const int chunk = (col >> 3) ^ (row & 7);
  return row * kHeadDim + (chunk << 3) + (col & 7);
}

// Shared-memory tile layouts. kRowSwizzled: [rows][kHeadDim], row pitch 2 * kHeadDim bytes
// (the mma.sync kernels, read with ldmatrix). kSw128: [kHeadDim / 64][rows][64], 128-byte
// rows (the layout of wgmma's 128-byte swizzle mode). Both XOR the 16-byte chunk index within
// a 128-byte span with row % 8.
enum class TileLayout { kRowSwizzled, kSw128 };

template <TileLayout kLayout, int kRows, int kHeadDim>
__device__ __forceinline__ int tile_offset(int row, int col) {
  if constexpr (kLayout == TileLayout::kRowSwizzled) {
    return swizzle<kHeadDim>(row, col);
  } else {
    const int c = col & 63;
    return (col >> 6) * kRows * 64 + row * 64 + (((c >> 3) ^ (row & 7)) << 3) + (c & 7);
  }
}

// Copies kRows x kHeadDim elements into a tile: rows r < 64 from lo + r * row_stride, rows
// r >= 64 from hi + (r - 64) * row_stride (two 64-row KV cache blocks, or hi = lo + 64 rows);
// rows r >= valid_rows are zero-filled. All kThreads threads take part. Thread t always copies
// chunk t % (kHeadDim / 8) of rows t / (kHeadDim / 8) + i * kRowsPerStep, so its shared and
// global offsets are computed once and every copy is one cp.async at an immediate offset.
template <TileLayout kLayout, int kRows, int kHeadDim, int kThreads, typename T>
__device__ __forceinline__ void load_tile_async(T* tile, int valid_rows, const T* lo, const T* hi,
                                                int64_t row_stride) {
  constexpr int kChunksPerRow = kHeadDim / 8;
  constexpr int kRowsPerStep = kThreads / kChunksPerRow;
  static_assert(kThreads % kChunksPerRow == 0 && kRowsPerStep % 8 == 0,
                "each step must cover whole rows and keep row % 8 per thread");
  static_assert(kRows % kRowsPerStep == 0 && (kRows <= 64 || 64 % kRowsPerStep == 0),
                "steps must not straddle the 64-row halves");
  const int t_row = static_cast<int>(threadIdx.x) / kChunksPerRow;
  const int t_col = (static_cast<int>(threadIdx.x) % kChunksPerRow) * 8;
  const uint32_t dst = smem_addr(tile + tile_offset<kLayout, kRows, kHeadDim>(t_row, t_col));
  const T* src_lo = lo + t_row * row_stride + t_col;
  const T* src_hi = hi + t_row * row_stride + t_col;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerStep; ++i) {
    const int row0 = i * kRowsPerStep;  // compile-time
    const bool valid = row0 + t_row < valid_rows;
    const T* src = row0 < 64 ? src_lo + row0 * row_stride : src_hi + (row0 - 64) * row_stride;
    // The layouts repeat every 8 rows, so row0 moves the destination by a constant.
    cp_async_16(dst + 2 * tile_offset<kLayout, kRows, kHeadDim>(row0, 0), valid ? src : src_lo,
                valid);
  }
}

// 2^x on the special-function unit, flushing subnormal results to 0 (a probability below
// 2^-126 of the row maximum contributes nothing to an fp32 sum of terms <= 1 anyway).
// exp2f() without -ftz adds subnormal handling around the same MUFU.EX2 instruction.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace flashserve::kernels::device
