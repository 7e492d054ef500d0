#pragma once
// The log-sum-exp combine of split-KV partials, for split decode and split prefill alike.
//
// A split of the key range leaves, for each query row, its output normalised over the split's
// keys (fp32, o_i) and the natural-log LSE of its scores (lse_i; -inf when the split saw no
// key of that row). Merging is exact up to fp32 rounding:
//   lse = log(sum_i exp(lse_i)),  out = sum_i exp(lse_i - lse) * out_i,
// computed from the largest lse_i (every weight <= 1). One CTA of head_dim threads per
// (query row, head); thread = column.
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_common.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/quant/quant_round.cuh"

namespace flashserve::kernels::device {

// An output element as stored: T(v), or with p.round_q8_out (bf16) the value that
// round_activations_q8 would leave there. The combine kernels write their outputs with a warp
// a unit of 32 (lane = column of a head_dim row, 32 | head_dim, and every lane of a warp that
// reaches the store does), so the unit's rounding is a few shuffles in registers.
template <typename T>
__device__ __forceinline__ T output_value(const AttentionParams& p, float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (p.round_q8_out) {
      float u[1] = {__bfloat162float(__float2bfloat16_rn(v))};
      round_q8_lanes<1>(u);
      v = u[0];
    }
  }
  return DTypeTraits<T>::from_float(v);
}

// Merges row `part` of every split (split i's row at part + i * split_stride) into output row
// `out_row` ([num_heads x head_dim] rows of p.out, p.lse): column threadIdx.x.
template <typename T, int kHeadDim>
__device__ __forceinline__ void combine_split_row(const AttentionParams& p, int num_splits,
                                                  int64_t split_stride, const float* o_partial,
                                                  const float* lse_partial, int64_t part,
                                                  int64_t out_row) {
  float m = kNegInf;
  for (int i = 0; i < num_splits; ++i) m = fmaxf(m, lse_partial[i * split_stride + part]);
  float sum = 0.f, o = 0.f;
  if (m != kNegInf) {
    for (int i = 0; i < num_splits; ++i) {
      const float weight = expf(lse_partial[i * split_stride + part] - m);
      sum += weight;
      o += weight * o_partial[(i * split_stride + part) * kHeadDim + threadIdx.x];
    }
  }
  static_cast<T*>(p.out)[out_row * kHeadDim + threadIdx.x] =
      output_value<T>(p, sum > 0.f ? o / sum : 0.f);
  if (p.lse != nullptr && threadIdx.x == 0) p.lse[out_row] = sum > 0.f ? m + logf(sum) : kNegInf;
}

// Decode: one CTA per (sequence, head); partial rows [split][seq][head]. Splits past the end
// of a short sequence wrote lse_i = -inf and weigh exactly 0.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kHeadDim)
    attention_decode_combine_kernel(const AttentionParams p, int num_splits,
                                    const float* o_partial, const float* lse_partial) {
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any global access
  allow_next_grid();
  const int64_t head_row = blockIdx.x;  // seq * num_heads + head
  combine_split_row<T, kHeadDim>(p, num_splits, static_cast<int64_t>(p.num_seqs) * p.num_heads,
                                 o_partial, lse_partial, head_row, head_row);
}

// Prefill: one CTA per (query i < max_seqlen_q, head) of sequence blockIdx.y; partial rows
// [split][seq][i][head] (attention_prefill_sm90_ws.cuh's split epilogue). A split whose keys
// a row cannot see (past its diagonal or before its window, or no tile at all) wrote -inf.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kHeadDim)
    attention_prefill_combine_kernel(const AttentionParams p, int num_splits,
                                     const float* o_partial, const float* lse_partial) {
  wait_for_prior_grid();
  allow_next_grid();
  const int seq = blockIdx.y;
  const int i = blockIdx.x / p.num_heads;
  const int head = blockIdx.x % p.num_heads;
  const int q_start = p.cu_seqlens_q[seq];
  if (i >= p.cu_seqlens_q[seq + 1] - q_start) return;
  const int64_t rows = static_cast<int64_t>(p.max_seqlen_q) * p.num_heads;
  combine_split_row<T, kHeadDim>(p, num_splits, p.num_seqs * rows, o_partial, lse_partial,
                                 seq * rows + blockIdx.x,
                                 (static_cast<int64_t>(q_start) + i) * p.num_heads + head);
}

}  // namespace flashserve::kernels::device
