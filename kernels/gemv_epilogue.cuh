#pragma once
// The device code that every small-batch GEMV shares, whatever its weight format
// (kernels/gemv.cu for bf16, kernels/quant/quant_gemv.cuh for ggml's block formats): the
// RMSNorm scale of a staged input row and the epilogues of GemvParams::output, applied to
// the warp-reduced fp32 dot products of one pair of weight rows. One copy, so that a
// quantized GEMV rounds, rotates and stores exactly as the bf16 one does.
#include <cuda_bf16.h>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/gemv.h"
#include "kernels/paged_kv.h"

namespace flashserve::kernels::device {

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// 1 / sqrt(mean(x^2) + eps) of one fp32 row of k, summed by the calling warp (every lane
// gets it), rounded to float once as kernels::rmsnorm does. A normalised input element is
// then __float2bfloat16(x[i] * scale * norm_weight[i]).
__device__ __forceinline__ float rms_scale(const float* x, int k, float eps, int lane) {
  float sum_sq = 0;
  for (int i = lane; i < k; i += 32) sum_sq += x[i] * x[i];
  sum_sq = warp_sum(sum_sq);
  return 1.f / sqrtf(sum_sq / k + eps);
}

// kRopeAppend: outputs col (even) and col + 1 of every row are one RoPE pair of one head,
// rounded to bf16 as the GEMM would store them, then rotated and stored exactly as
// rope_append_kernel does (Q packed, K and V into the paged cache; slot < 0 is padding).
template <int kRows>
__device__ __forceinline__ void store_rope_pair(const GemvParams& p, int col, const float* a0,
                                                const float* a1, int lane) {
  const RopeAppendParams& q = p.rope;
  const int half = q.head_dim / 2;
  col += p.rope_first_col;  // the column of the whole QKV
  const int head = col / q.head_dim, i = (col % q.head_dim) / 2;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r >= p.m || lane != r) continue;  // lane r stores token r
    float x = round_to_bf16(a0[r]);
    float y = round_to_bf16(a1[r]);
    if (head < q.num_heads + q.num_kv_heads) {  // Q or K: rotate
      const int64_t at = static_cast<int64_t>(q.positions[r]) * half + i;
      const float c = q.cos[at], s = q.sin[at];
      const float rx = x * c - y * s, ry = x * s + y * c;
      x = rx;
      y = ry;
    }
    __nv_bfloat16* dst;
    if (head < q.num_heads) {
      dst = static_cast<__nv_bfloat16*>(q.q_out) +
            (static_cast<int64_t>(r) * q.num_heads + head) * q.head_dim;
    } else {
      const int64_t slot = q.slot_mapping[r];
      if (slot < 0) continue;
      const bool is_k = head < q.num_heads + q.num_kv_heads;
      const int kv_head = (head - q.num_heads) % q.num_kv_heads;
      dst = static_cast<__nv_bfloat16*>(is_k ? q.k_cache : q.v_cache) +
            kv_cache_offset(slot / q.block_size, kv_head, slot % q.block_size, q.num_kv_heads,
                            q.block_size, q.head_dim);
    }
    dst[2 * i] = __float2bfloat16(x);
    dst[2 * i + 1] = __float2bfloat16(y);
  }
}

// Writes output column `col` of rows [0, m) from a0 (and, for kSwiglu, the up half a1).
template <int kRows>
__device__ __forceinline__ void store_outputs(const GemvParams& p, int col, const float* a0,
                                              const float* a1, int lane) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r >= p.m || lane != r) continue;  // lane r stores row r
    const int64_t at = static_cast<int64_t>(r) * p.n + col;
    switch (p.output) {
      case GemvOutput::kBf16:
        static_cast<__nv_bfloat16*>(p.y)[at] = __float2bfloat16(a0[r]);
        break;
      case GemvOutput::kFp32: static_cast<float*>(p.y)[at] = a0[r]; break;
      case GemvOutput::kFp32Accumulate: static_cast<float*>(p.y)[at] += a0[r]; break;
      case GemvOutput::kRopeAppend: break;  // store_rope_pair
      case GemvOutput::kSwiglu: {
        const float g = round_to_bf16(a0[r]);
        const float u = round_to_bf16(a1[r]);
        static_cast<__nv_bfloat16*>(p.y)[at] = __float2bfloat16(g / (1.f + expf(-g)) * u);
        break;
      }
    }
  }
}

// The weight rows of pair `pair`: gate `pair` and up `pair` (kSwiglu), else outputs
// 2 * pair and the next (the last pair of an odd n reads its first row twice and stores
// once).
struct GemvPairRows {
  int row0, row1;
};
__device__ __forceinline__ GemvPairRows gemv_pair_rows(const GemvParams& p, int pair) {
  if (p.output == GemvOutput::kSwiglu) return {pair, p.n + pair};
  return {2 * pair, min(2 * pair + 1, p.n - 1)};
}
__device__ __forceinline__ int gemv_num_pairs(const GemvParams& p) {
  return p.output == GemvOutput::kSwiglu ? p.n : (p.n + 1) / 2;
}

// The epilogue of one pair, from the warp-reduced sums a0 (row0) and a1 (row1) of every
// input row (each lane holds all of them).
template <int kRows>
__device__ __forceinline__ void store_pair(const GemvParams& p, int pair, const float* a0,
                                           const float* a1, int lane) {
  const GemvPairRows rows = gemv_pair_rows(p, pair);
  if (p.output == GemvOutput::kRopeAppend) {
    store_rope_pair<kRows>(p, rows.row0, a0, a1, lane);
  } else if (p.output == GemvOutput::kSwiglu) {
    store_outputs<kRows>(p, pair, a0, a1, lane);
  } else {
    store_outputs<kRows>(p, rows.row0, a0, a1, lane);
    if (rows.row1 != rows.row0) store_outputs<kRows>(p, rows.row1, a1, a0, lane);
  }
}

}  // namespace flashserve::kernels::device
