#pragma once
// Device building blocks shared by the attention kernels: the shared-memory tile layouts and
// tile loads, the softmax's exp2 and quad reductions (the tensor-core instruction, ldmatrix,
// cp.async and the swizzle: kernels/mma_sync.cuh; dtype traits and error checks:
// kernels/cuda_plumbing.cuh). Host code never includes this file.
//
// The C layout of mma.sync's two adjacent 8-key n-tiles equals the A layout of one 16-key
// k-step (kernels/mma_sync.cuh), which is what lets P go from the softmax straight into the
// PV product without shared memory.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/mma_sync.cuh"
#include "kernels/quant/quant_round.cuh"

namespace flashserve::kernels::device {

inline constexpr float kLog2e = 1.4426950408889634f;

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

// The sliding window as a bound on (query position - key): keys with a difference below it
// are visible (kernels/attention/attention.h). Without a window the bound is one no
// difference reaches (positions stay below 2^30), so one comparison serves both cases.
__host__ __device__ __forceinline__ int window_keys(int sliding_window) {
  return sliding_window > 0 ? sliding_window : (1 << 30);
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

// A prefill epilogue's output row of one head as the MMA accumulator holds it: v[j] is the
// lane's two columns 8 j + 2 (lane % 4), + 1 of 8-column tile j, the quad's four lanes
// holding the row. With p.round_q8_out each unit of 32 columns (tiles 4 u .. 4 u + 3: eight
// values a lane over the quad, round_q8_lanes<8>) becomes what round_activations_q8 leaves
// in the stored bf16 row, bit for bit (the values rounded to bf16 first, as stored); without
// it, or for fp16, v is left as it is. Every lane of the warp calls it (full-mask shuffles),
// the lanes of rows past the sequence too: a unit never leaves its quad, and their values
// are never stored.
template <typename T, int kTiles>
__device__ __forceinline__ void prefill_round_q8_out(bool round_q8_out, float (&v)[kTiles][2]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    static_assert(kTiles % 4 == 0, "a unit of 32 columns is four 8-column tiles");
    if (!round_q8_out) return;
#pragma unroll
    for (int u = 0; u < kTiles / 4; ++u) {
      float w[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        w[2 * i] = round_to_bf16(v[4 * u + i][0]);
        w[2 * i + 1] = round_to_bf16(v[4 * u + i][1]);
      }
      round_q8_lanes<8>(w);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[4 * u + i][0] = w[2 * i];
        v[4 * u + i][1] = w[2 * i + 1];
      }
    }
  }
}

}  // namespace flashserve::kernels::device
