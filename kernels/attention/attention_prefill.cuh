#pragma once
// Fused FlashAttention forward for prefill (sm_80 mma.sync path; runs on sm_80/89/90).
//
// One CTA = one (sequence, query head, block of kPrefillBlockM query rows). It streams the
// sequence's K/V in tiles of kPrefillBlockN keys through a two-stage cp.async pipeline; each
// warp owns 32 query rows and, per tile:
//   S = Q K^T          (tensor cores, fp32 accumulators in registers)
//   mask               (only on tiles crossing the causal diagonal, the sequence end or the
//                       sliding window's start)
//   online softmax     (running max m and sum l per row; acc and l rescaled by
//                       exp(m_old - m_new) whenever the max moves)
//   acc += P V         (P rounded to the input dtype straight from the S registers)
// so S and P never leave registers. FLOPs: 4 * q_len * visible keys * head_dim per head.
// With a sliding window the loop starts at the tile holding the window start of the CTA's
// first row (the earliest of its rows): tiles before it are never loaded.
//
// Numerics: scores stay fp32; exp is exp2 with the scale folded into one FMA
// (s * scale * log2(e) - m * scale * log2(e)); P is rounded to bf16/fp16 only as the PV
// operand, with values in [0, 1] (relative error 2^-9 for bf16, 2^-12 for fp16); l sums the
// unrounded fp32 p; the output is divided by l in fp32 and rounded once. A row whose tile is
// fully masked keeps m = -inf; we then subtract 0 instead of m so that exp2(-inf - (-inf))
// (NaN) never occurs: all its p are exp2(-inf) = 0.
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_common.cuh"
#include "kernels/paged_kv.h"

namespace flashserve::kernels::device {

// 4 warps: with ~200 registers per thread two CTAs (8 warps) fit one SM's register file.
constexpr int prefill_warps() { return 4; }
// 32 query rows per warp (two m16 tiles): every K/V fragment loaded from shared memory feeds
// two MMAs, halving ldmatrix traffic per FLOP, which bounds the 16-row variant.
constexpr int prefill_m_tiles_per_warp() { return 2; }
constexpr int prefill_block_m() { return prefill_warps() * 16 * prefill_m_tiles_per_warp(); }
// 64 keys = one KV cache block (kKvBlockSize): a tile is one contiguous copy, one table lookup.
constexpr int prefill_block_n() { return 64; }
constexpr int prefill_threads() { return prefill_warps() * 32; }
// CTAs per SM the register allocation aims for (launch bounds): 2, i.e. up to 255 registers.
// (3 at d64 caps registers at 168 and spills, for a gain that vanishes at long sequences:
// measured in bench/attention/NOTES.md.)
constexpr int prefill_ctas_per_sm() { return 2; }
// Q tile + two stages of K and V tiles, all [rows][head_dim] b16.
constexpr int prefill_smem_bytes(int head_dim) {
  return (prefill_block_m() + 4 * prefill_block_n()) * head_dim * 2;
}

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(prefill_threads(), prefill_ctas_per_sm())
    attention_prefill_kernel(const AttentionParams p) {
  constexpr int kBlockM = prefill_block_m();
  constexpr int kBlockN = prefill_block_n();
  constexpr int kMTiles = prefill_m_tiles_per_warp();
  constexpr int kThreads = prefill_threads();
  constexpr int kNTiles = kBlockN / 8;   // 8-key n-tiles of S per row block
  constexpr int kDTiles = kHeadDim / 8;  // 8-dim n-tiles of the output accumulator
  using Traits = DTypeTraits<T>;

  const int seq = blockIdx.z;
  const int head = blockIdx.y;
  // Highest row blocks first: under a causal mask they have the most tiles, so the long CTAs
  // start early and the short ones fill the tail of the grid.
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int q_start = p.cu_seqlens_q[seq];
  const int q_len = p.cu_seqlens_q[seq + 1] - q_start;
  const int m_base = m_block * kBlockM;
  if (m_base >= q_len) return;
  const int kv_len = p.seqlens_k[seq];
  const int q_offset = kv_len - q_len;  // cache position of query row 0
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int rows = min(kBlockM, q_len - m_base);
  const int n_end = p.causal ? min(kv_len, q_offset + m_base + rows) : kv_len;
  const int window = window_keys(p.sliding_window);
  const int first_tile = max(0, q_offset + m_base - window + 1) / kBlockN;
  const int num_tiles = max(0, (n_end + kBlockN - 1) / kBlockN - first_tile);  // from first_tile

  extern __shared__ uint4 smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);
  T* sk = sq + kBlockM * kHeadDim;       // [2][kBlockN][kHeadDim]
  T* sv = sk + 2 * kBlockN * kHeadDim;   // [2][kBlockN][kHeadDim]

  const int64_t q_row_stride = static_cast<int64_t>(p.num_heads) * kHeadDim;
  const T* q_base = static_cast<const T*>(p.q) +
                    (static_cast<int64_t>(q_start + m_base) * p.num_heads + head) * kHeadDim;
  load_tile_async<TileLayout::kRowSwizzled, kBlockM, kHeadDim, kThreads>(
      sq, rows, q_base, q_base + 64 * q_row_stride, q_row_stride);

  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  const T* k_cache = static_cast<const T*>(p.k_cache);
  const T* v_cache = static_cast<const T*>(p.v_cache);
  auto load_kv = [&](int tile, int stage) {
    const int key0 = (first_tile + tile) * kBlockN;
    const int64_t block = table[key0 / p.block_size];
    const int64_t off = kv_cache_offset(block, kv_head, key0 % p.block_size, p.num_kv_heads,
                                        p.block_size, kHeadDim);
    const T* kb = k_cache + off;
    const T* vb = v_cache + off;
    load_tile_async<TileLayout::kRowSwizzled, kBlockN, kHeadDim, kThreads>(
        sk + stage * kBlockN * kHeadDim, kv_len - key0, kb, kb, kHeadDim);
    load_tile_async<TileLayout::kRowSwizzled, kBlockN, kHeadDim, kThreads>(
        sv + stage * kBlockN * kHeadDim, kv_len - key0, vb, vb, kHeadDim);
  };
  if (num_tiles > 0) load_kv(0, 0);
  cp_async_commit();

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int warp_row = warp * kMTiles * 16;  // first row of this warp within the block
  const float scale_log2 = p.softmax_scale * kLog2e;

  // At d64 the warp's Q fragments (2 x 4 x 4 registers) stay in registers for the whole
  // loop instead of being re-read from shared memory for every K tile (a fifth of the
  // ldmatrix traffic); at d128 they would need 64 registers the kernel does not have.
  constexpr bool kQInRegisters = kHeadDim == 64;
  uint32_t q_frag[kQInRegisters ? kMTiles : 1][kQInRegisters ? kHeadDim / 16 : 1][4];
  float acc[kMTiles][kDTiles][4] = {};
  float row_max[kMTiles][2];
  float row_sum[kMTiles][2] = {};  // per-thread partial sums; reduced over the quad at the end
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) row_max[mt][0] = row_max[mt][1] = kNegInf;

  for (int n = 0; n < num_tiles; ++n) {
    if (n + 1 < num_tiles) load_kv(n + 1, (n + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* k_tile = sk + (n & 1) * kBlockN * kHeadDim;
    const T* v_tile = sv + (n & 1) * kBlockN * kHeadDim;

    if constexpr (kQInRegisters) {
      if (n == 0) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
          for (int kk = 0; kk < kHeadDim / 16; ++kk) {
            ldmatrix_x4(q_frag[mt][kk],
                        smem_addr(sq + swizzle<kHeadDim>(warp_row + mt * 16 + (lane & 15),
                                                         kk * 16 + (lane >> 4) * 8)));
          }
        }
      }
    }

    // ---- S = Q K^T ----
    float s[kMTiles][kNTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        if constexpr (kQInRegisters) {
#pragma unroll
          for (int r = 0; r < 4; ++r) a[mt][r] = q_frag[mt][kk][r];
        } else {
          ldmatrix_x4(a[mt], smem_addr(sq + swizzle<kHeadDim>(warp_row + mt * 16 + (lane & 15),
                                                              kk * 16 + (lane >> 4) * 8)));
        }
      }
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4(b, smem_addr(k_tile + swizzle<kHeadDim>(np * 16 + (lane & 7) + (lane >> 4) * 8,
                                                            kk * 16 + ((lane >> 3) & 1) * 8)));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(s[mt][2 * np], a[mt], b[0], b[1]);
          mma_16816<T>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }

    // ---- mask: keys past the sequence end, (causal) keys after the row's position, and
    // keys before its window (position - key >= window) ----
    const int key0 = (first_tile + n) * kBlockN;
    const bool crosses_end = key0 + kBlockN > kv_len;
    const bool crosses_diagonal = p.causal && key0 + kBlockN - 1 > q_offset + m_base;
    const bool crosses_window = q_offset + m_base + kBlockM - 1 - key0 >= window;
    if (crosses_end || crosses_diagonal || crosses_window) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = key0 + nt * 8 + 2 * (lane & 3) + (e & 1);
            const int row = m_base + warp_row + mt * 16 + (lane >> 2) + (e >> 1) * 8;
            const bool visible = key < kv_len && (!p.causal || key <= q_offset + row) &&
                                 q_offset + row - key < window;
            if (!visible) s[mt][nt][e] = kNegInf;
          }
        }
      }
    }

    // ---- online softmax ----
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // h = 0: row g, h = 1: row g + 8
        float m_new = row_max[mt][h];
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          m_new = fmaxf(m_new, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
        }
        m_new = quad_max(m_new);
        const float m_scaled = m_new == kNegInf ? 0.f : m_new * scale_log2;
        const float correction = fast_exp2(row_max[mt][h] * scale_log2 - m_scaled);
        row_max[mt][h] = m_new;
        float tile_sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int e = 2 * h; e < 2 * h + 2; ++e) {
            s[mt][nt][e] = fast_exp2(fmaf(s[mt][nt][e], scale_log2, -m_scaled));
            tile_sum += s[mt][nt][e];
          }
        }
        row_sum[mt][h] = row_sum[mt][h] * correction + tile_sum;
#pragma unroll
        for (int dt = 0; dt < kDTiles; ++dt) {
          acc[mt][dt][2 * h] *= correction;
          acc[mt][dt][2 * h + 1] *= correction;
        }
      }
    }

    // ---- acc += P V ----
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        a[mt][0] = Traits::pack(s[mt][2 * ks][0], s[mt][2 * ks][1]);
        a[mt][1] = Traits::pack(s[mt][2 * ks][2], s[mt][2 * ks][3]);
        a[mt][2] = Traits::pack(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
        a[mt][3] = Traits::pack(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kHeadDim / 16; ++dp) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, smem_addr(v_tile + swizzle<kHeadDim>(
                                                    ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                    dp * 16 + (lane >> 4) * 8)));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(acc[mt][2 * dp], a[mt], b[0], b[1]);
          mma_16816<T>(acc[mt][2 * dp + 1], a[mt], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's copy overwrites the stage just read
  }
  cp_async_wait<0>();

  // ---- epilogue: out = acc / l, lse = m * scale + log(l) ----
  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = quad_sum(row_sum[mt][h]);
      const float inv_l = l > 0.f ? 1.f / l : 0.f;
      const int row = m_base + warp_row + mt * 16 + (lane >> 2) + h * 8;
      float v[kDTiles][2];
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        v[dt][0] = acc[mt][dt][2 * h] * inv_l;
        v[dt][1] = acc[mt][dt][2 * h + 1] * inv_l;
      }
      prefill_round_q8_out<T>(p.round_q8_out, v);  // every lane, before the row test
      if (row >= q_len) continue;
      const int64_t token = q_start + row;
      T* o = out + (token * p.num_heads + head) * kHeadDim + 2 * (lane & 3);
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        *reinterpret_cast<uint32_t*>(o + dt * 8) = Traits::pack(v[dt][0], v[dt][1]);
      }
      if (p.lse != nullptr && (lane & 3) == 0) {
        p.lse[token * p.num_heads + head] =
            l > 0.f ? row_max[mt][h] * p.softmax_scale + logf(l) : kNegInf;
      }
    }
  }
}

}  // namespace flashserve::kernels::device
