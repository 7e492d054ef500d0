#pragma once
// Split-KV decode (flash-decoding) over the paged cache, GQA-packed, on sm_80 tensor cores.
//
// One CTA = one (split, KV head, sequence). The query heads that share the KV head (the GQA
// group, G <= 16) are the 16 rows of one m16 MMA tile, so every K/V tile is read from memory
// once for the whole group; rows >= G are zero and never written. The CTA streams its split's
// K/V tiles (64 keys) through a kDecodeStages-deep cp.async pipeline; warp w owns keys
// [16w, 16w + 16) of every tile and keeps its own online-softmax state (m, l, acc). At the
// end the four warps' states are merged through shared memory with the same rescaling rule,
// and the CTA writes either the final output (one split) or a normalised partial output and
// its log-sum-exp, which attention_decode_combine_kernel (kernels/attention/attention_combine.cuh)
// merges across splits:
//   lse = log(sum_i exp(lse_i)),  out = sum_i exp(lse_i - lse) * out_i.
// Decode is bound by reading K/V (2 * kv_len * head_dim * 2 bytes per KV head); the MMA
// wastes 16 / G of its rows, which costs nothing measurable at this arithmetic intensity.
// With a sliding window W the splits share only the tiles from the one holding the window
// start (key kv_len - W) on, so a local layer reads ~W keys whatever the context.
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_combine.cuh"
#include "kernels/attention/attention_common.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/paged_kv.h"
#include "kernels/quant/quant_round.cuh"

namespace flashserve::kernels::device {

constexpr int decode_threads() { return 128; }  // 4 warps x 16 keys = one 64-key tile
constexpr int decode_block_n() { return 64; }   // one KV cache block per tile
// Enough tiles in flight per CTA to cover memory latency with 2 CTAs per SM
// (d128: 3 x 32 KiB; d64: 4 x 16 KiB).
constexpr int decode_stages(int head_dim) { return head_dim >= 128 ? 3 : 4; }
constexpr int decode_smem_bytes(int head_dim) {
  const int pipeline = (16 + 2 * decode_stages(head_dim) * decode_block_n()) * head_dim * 2;
  const int merge = 4 * 16 * (head_dim + 2) * 4;  // per-warp acc, m and l, fp32
  return pipeline > merge ? pipeline : merge;
}

// The decode kernel's kN consecutive outputs of a lane (kN | 32, a unit of 32 the 32 / kN
// lanes that start at a multiple of 32 / kN), in place: with p.round_q8_out (bf16) rounded as
// round_activations_q8 rounds them, to be stored as T. Called by every lane of the warp;
// a lane that stores nothing passes real = false (its values count as zeros, and its whole
// unit must be such lanes).
template <typename T, int kN>
__device__ __forceinline__ void output_values(const AttentionParams& p, bool real,
                                              float (&v)[kN]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (p.round_q8_out) {
#pragma unroll
      for (int i = 0; i < kN; ++i) v[i] = real ? __bfloat162float(__float2bfloat16_rn(v[i])) : 0.f;
      round_q8_lanes<kN>(v);
    }
  }
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(decode_threads(), 2)
    attention_decode_kernel(const AttentionParams p, int num_splits, float* o_partial,
                            float* lse_partial) {
  constexpr int kBlockN = decode_block_n();
  constexpr int kStages = decode_stages(kHeadDim);
  constexpr int kThreads = decode_threads();
  constexpr int kDTiles = kHeadDim / 8;
  constexpr int kKSteps = kHeadDim / 16;
  using Traits = DTypeTraits<T>;
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any global access
  allow_next_grid();

  const int split = blockIdx.x;
  const int kv_head = blockIdx.y;
  const int seq = blockIdx.z;
  const int group = p.num_heads / p.num_kv_heads;
  const int head0 = kv_head * group;
  const int kv_len = p.seqlens_k[seq];
  // The query sits at kv_len - 1 and sees keys k with kv_len - 1 - k < window.
  const int window_start = max(0, kv_len - window_keys(p.sliding_window));
  const int first_tile = window_start / kBlockN;
  const int window_tiles = (kv_len + kBlockN - 1) / kBlockN - first_tile;
  const int tiles_per_split = (window_tiles + num_splits - 1) / num_splits;
  const int t0 = first_tile + min(split * tiles_per_split, window_tiles);
  const int t1 = min(t0 + tiles_per_split, first_tile + window_tiles);

  extern __shared__ uint4 smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);        // [16][kHeadDim]
  T* sk = sq + 16 * kHeadDim;                    // [kStages][kBlockN][kHeadDim]
  T* sv = sk + kStages * kBlockN * kHeadDim;     // [kStages][kBlockN][kHeadDim]

  const T* q_base = static_cast<const T*>(p.q) +
                    (static_cast<int64_t>(seq) * p.num_heads + head0) * kHeadDim;
  load_tile_async<TileLayout::kRowSwizzled, 16, kHeadDim, kThreads>(sq, group, q_base, q_base,
                                                                     kHeadDim);
  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  auto load_kv = [&](int tile, int stage) {
    const int key0 = tile * kBlockN;
    const int64_t off = kv_cache_offset(table[key0 / p.block_size], kv_head,
                                        key0 % p.block_size, p.num_kv_heads, p.block_size,
                                        kHeadDim);
    const T* kb = static_cast<const T*>(p.k_cache) + off;
    const T* vb = static_cast<const T*>(p.v_cache) + off;
    load_tile_async<TileLayout::kRowSwizzled, kBlockN, kHeadDim, kThreads>(
        sk + stage * kBlockN * kHeadDim, kv_len - key0, kb, kb, kHeadDim);
    load_tile_async<TileLayout::kRowSwizzled, kBlockN, kHeadDim, kThreads>(
        sv + stage * kBlockN * kHeadDim, kv_len - key0, vb, vb, kHeadDim);
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (t0 + i < t1) load_kv(t0 + i, i);
    cp_async_commit();  // group i (the first also carries Q)
  }

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const float scale_log2 = p.softmax_scale * kLog2e;
  uint32_t qf[kKSteps][4];
  float acc[kDTiles][4] = {};
  float row_max[2] = {kNegInf, kNegInf};
  float row_sum[2] = {0.f, 0.f};

  for (int t = t0; t < t1; ++t) {
    const int i = t - t0;
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile t has landed, and every warp is done with the stage refilled next
    if (t + kStages - 1 < t1) load_kv(t + kStages - 1, (i + kStages - 1) % kStages);
    cp_async_commit();
    if (i == 0) {
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        ldmatrix_x4(qf[kk], smem_addr(sq + swizzle<kHeadDim>(lane & 15, kk * 16 + (lane >> 4) * 8)));
      }
    }
    const T* k_tile = sk + (i % kStages) * kBlockN * kHeadDim;
    const T* v_tile = sv + (i % kStages) * kBlockN * kHeadDim;
    const int key_base = warp * 16;  // this warp's 16 keys within the tile

    float s[2][4] = {};
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      uint32_t b[4];
      ldmatrix_x4(b, smem_addr(k_tile + swizzle<kHeadDim>(key_base + (lane & 7) + (lane >> 4) * 8,
                                                          kk * 16 + ((lane >> 3) & 1) * 8)));
      mma_16816<T>(s[0], qf[kk], b[0], b[1]);
      mma_16816<T>(s[1], qf[kk], b[2], b[3]);
    }
    const int key0 = t * kBlockN + key_base;
    if (key0 + 16 > kv_len || key0 < window_start) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key0 + nt * 8 + 2 * (lane & 3) + (e & 1);
          if (key >= kv_len || key < window_start) s[nt][e] = kNegInf;
        }
      }
    }
    // Online softmax; a warp whose keys are all masked keeps m = -inf and subtracts 0
    // instead (see attention_prefill.cuh), so its p are exactly 0, never NaN.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m_new = fmaxf(row_max[h], fmaxf(fmaxf(s[0][2 * h], s[0][2 * h + 1]),
                                            fmaxf(s[1][2 * h], s[1][2 * h + 1])));
      m_new = quad_max(m_new);
      const float m_scaled = m_new == kNegInf ? 0.f : m_new * scale_log2;
      const float correction = fast_exp2(row_max[h] * scale_log2 - m_scaled);
      row_max[h] = m_new;
      float tile_sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[nt][e] = fast_exp2(fmaf(s[nt][e], scale_log2, -m_scaled));
          tile_sum += s[nt][e];
        }
      }
      row_sum[h] = row_sum[h] * correction + tile_sum;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        acc[dt][2 * h] *= correction;
        acc[dt][2 * h + 1] *= correction;
      }
    }
    const uint32_t a[4] = {Traits::pack(s[0][0], s[0][1]), Traits::pack(s[0][2], s[0][3]),
                           Traits::pack(s[1][0], s[1][1]), Traits::pack(s[1][2], s[1][3])};
#pragma unroll
    for (int dp = 0; dp < kHeadDim / 16; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, smem_addr(v_tile + swizzle<kHeadDim>(
                                                  key_base + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                  dp * 16 + (lane >> 4) * 8)));
      mma_16816<T>(acc[2 * dp], a, b[0], b[1]);
      mma_16816<T>(acc[2 * dp + 1], a, b[2], b[3]);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline buffers become the merge buffers

  // ---- merge the four warps' states: [warp][row] m, l and [warp][row][dim] acc ----
  float* m_smem = reinterpret_cast<float*>(smem_raw);  // [4][16]
  float* l_smem = m_smem + 4 * 16;                      // [4][16]
  float* acc_smem = l_smem + 4 * 16;                    // [4][16][kHeadDim]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = (lane >> 2) + 8 * h;
    const float l = quad_sum(row_sum[h]);
    if ((lane & 3) == 0) {
      m_smem[warp * 16 + row] = row_max[h];
      l_smem[warp * 16 + row] = l;
    }
    float* dst = acc_smem + (warp * 16 + row) * kHeadDim + 2 * (lane & 3);
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      dst[dt * 8] = acc[dt][2 * h];
      dst[dt * 8 + 1] = acc[dt][2 * h + 1];
    }
  }
  __syncthreads();
  // A thread merges kVec consecutive columns of one row, so that a row's weights and 1 / l
  // are computed once for kVec outputs, and a unit of 32 outputs (round_q8_out) is 8 lanes.
  // Every lane of a warp runs the same iterations (the bound padded to whole warps: the
  // rounding's shuffles are full-mask); a padded lane merges row 0 and stores nothing, and
  // the number of real ones, group * kRowVecs, is a multiple of 8, so no unit mixes them.
  constexpr int kVec = 4;
  constexpr int kRowVecs = kHeadDim / kVec;
  static_assert(kRowVecs % 8 == 0 && kThreads % 32 == 0);
  const int vecs = group * kRowVecs;
  const int vecs_padded = (vecs + 31) / 32 * 32;
  for (int e = threadIdx.x; e < vecs_padded; e += kThreads) {
    const bool real = e < vecs;
    const int row = real ? e / kRowVecs : 0;
    const int col = (e % kRowVecs) * kVec;
    float m = kNegInf;
#pragma unroll
    for (int w = 0; w < 4; ++w) m = fmaxf(m, m_smem[w * 16 + row]);
    float l = 0.f, o[kVec] = {};
    if (m != kNegInf) {
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const float weight = fast_exp2((m_smem[w * 16 + row] - m) * scale_log2);  // -inf -> 0
        l += weight * l_smem[w * 16 + row];
        const float4 a =
            *reinterpret_cast<const float4*>(acc_smem + (w * 16 + row) * kHeadDim + col);
        o[0] += weight * a.x;
        o[1] += weight * a.y;
        o[2] += weight * a.z;
        o[3] += weight * a.w;
      }
    }
    float out_values[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) out_values[i] = l > 0.f ? o[i] / l : 0.f;
    const float lse = l > 0.f ? m * p.softmax_scale + logf(l) : kNegInf;
    const int64_t head_row = static_cast<int64_t>(seq) * p.num_heads + head0 + row;
    if (num_splits == 1) {
      output_values<T>(p, real, out_values);  // every lane: the rounding's shuffles
      if (real) {
        T* dst = static_cast<T*>(p.out) + head_row * kHeadDim + col;
#pragma unroll
        for (int i = 0; i < kVec; ++i) dst[i] = Traits::from_float(out_values[i]);
        if (p.lse != nullptr && col == 0) p.lse[head_row] = lse;
      }
    } else if (real) {
      const int64_t part = static_cast<int64_t>(split) * p.num_seqs * p.num_heads + head_row;
#pragma unroll
      for (int i = 0; i < kVec; ++i) o_partial[part * kHeadDim + col + i] = out_values[i];
      if (col == 0) lse_partial[part] = lse;
    }
  }
}

}  // namespace flashserve::kernels::device
