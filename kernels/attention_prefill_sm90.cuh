#pragma once
// Fused FlashAttention forward for prefill, Hopper path (sm_90a: wgmma).
//
// Same algorithm and numerics as the portable kernel (kernels/attention_prefill.cuh); what
// changes is the matrix unit. One CTA = 2 warpgroups = 128 query rows of one (sequence, head) at d128;
// each warpgroup owns 64 rows and issues warpgroup MMAs (wgmma.mma_async m64nNk16):
//   S[64 x 128]  = Q K^T   A = Q and B = K from shared memory (K-major, 128-byte swizzle)
//   O[64 x d]   += P V     A = P from registers (the softmax's own fp32 -> 16-bit output, in
//                          the same per-warp fragment layout as mma.sync's A), B = V from
//                          shared memory read N-major (wgmma transposes it on the fly)
// Hopper's wgmma issues a 64x128x16 product per instruction from one warpgroup (mma.sync needs
// 32 instructions across 4 warps for the same work) and reads B straight from shared memory
// without ldmatrix: that is the rate difference the portable path cannot close.
//
// Shared-memory tiles use the layout wgmma's 128-byte swizzle mode expects: [head_dim / 64]
// column halves, each [rows][64] b16 with rows of 128 B and the 16-byte chunk index XOR-ed with
// row % 8; every tile starts 1024-byte aligned (the swizzle repeats every 8 rows = 1024 B).
// Descriptors: K-major (Q, K): SBO = 1024 B between 8-row groups, LBO unused; a 16-wide
// k-step advances the start address by 32 B inside the 128-B row, or jumps to the next half.
// N-major (V): LBO = distance between the two 64-column halves, SBO = 1024 B between groups of
// 8 keys. cp.async (generic proxy) writes the tiles; each thread fences them to the async
// proxy (fence.proxy.async) before the barrier that precedes the wgmma reads.
// (At head_dim 64 the CTA has 3 warpgroups = 192 rows; see sm90_warpgroups.)
#include "kernels/attention.h"
#include "kernels/attention_common.cuh"
#include "kernels/paged_kv.h"
#include "kernels/wgmma_ops.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHSERVE_SM90A 1
#endif

namespace flashserve::kernels::device {

// Warpgroups per CTA, 64 query rows each; while one runs its softmax the others keep the
// tensor cores busy. d128: 2 (about 205 registers per thread; 3 would not fit the register
// file). d64: 3 (its O accumulator is half the size, ~167 registers fit 384 threads, and each
// K/V tile copied to shared memory then serves 192 rows instead of 128).
constexpr int sm90_warpgroups(int head_dim) { return head_dim == 64 ? 3 : 2; }
constexpr int sm90_threads(int head_dim) { return 128 * sm90_warpgroups(head_dim); }
constexpr int sm90_block_m(int head_dim) { return 64 * sm90_warpgroups(head_dim); }
// Threads that issue the tile copies (a fixed 256 keeps each copy step within whole rows).
constexpr int sm90_copy_threads() { return 256; }
// 128 keys per tile: S = QK^T is one m64n128 wgmma chain per warpgroup (wider N, fewer issues).
constexpr int sm90_block_n() { return 128; }
// Q + two stages of K and V, plus 1 KiB to align the tiles to 1024 B.
constexpr int sm90_smem_bytes(int head_dim) {
  return (sm90_block_m(head_dim) + 4 * sm90_block_n()) * head_dim * 2 + 1024;
}

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

template <typename T, int kHeadDim>
__global__ void __launch_bounds__(sm90_threads(kHeadDim), 1)
    attention_prefill_sm90_kernel(const AttentionParams p) {
#ifdef FLASHSERVE_SM90A
  constexpr int kBlockM = sm90_block_m(kHeadDim);
  constexpr int kBlockN = sm90_block_n();
  constexpr int kCopyThreads = sm90_copy_threads();
  // Compile-time true at d128 (256 threads), so that path carries no branch.
  const bool copies = sm90_threads(kHeadDim) == kCopyThreads || threadIdx.x < kCopyThreads;
  constexpr int kSRegs = kBlockN / 2;   // S accumulator: 64 x kBlockN over 128 threads
  constexpr int kORegs = kHeadDim / 2;  // O accumulator: 64 x kHeadDim over 128 threads
  using Traits = DTypeTraits<T>;

  const int seq = blockIdx.z;
  const int head = blockIdx.y;
  const int m_block = gridDim.x - 1 - blockIdx.x;  // longest (causal) row blocks first
  const int q_start = p.cu_seqlens_q[seq];
  const int q_len = p.cu_seqlens_q[seq + 1] - q_start;
  const int m_base = m_block * kBlockM;
  if (m_base >= q_len) return;
  const int kv_len = p.seqlens_k[seq];
  const int q_offset = kv_len - q_len;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int rows = min(kBlockM, q_len - m_base);
  const int n_end = p.causal ? min(kv_len, q_offset + m_base + rows) : kv_len;
  const int num_tiles = (n_end + kBlockN - 1) / kBlockN;

  extern __shared__ uint4 smem_raw[];
  const uint32_t pad = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  T* sq = reinterpret_cast<T*>(reinterpret_cast<char*>(smem_raw) + pad);
  T* sk = sq + kBlockM * kHeadDim;      // [2][kBlockN x kHeadDim]
  T* sv = sk + 2 * kBlockN * kHeadDim;  // [2][kBlockN x kHeadDim]

  const int64_t q_row_stride = static_cast<int64_t>(p.num_heads) * kHeadDim;
  const T* q_base = static_cast<const T*>(p.q) +
                    (static_cast<int64_t>(q_start + m_base) * p.num_heads + head) * kHeadDim;
  if (copies) {
    load_tile_async<TileLayout::kSw128, kBlockM, kHeadDim, kCopyThreads>(
        sq, rows, q_base, q_base + 64 * q_row_stride, q_row_stride);
  }

  const int32_t* table = p.block_tables + static_cast<int64_t>(seq) * p.max_blocks_per_seq;
  auto cache_rows = [&](const T* cache, int key) {  // 64 consecutive rows from `key` on
    return cache + kv_cache_offset(table[key / p.block_size], kv_head, key % p.block_size,
                                   p.num_kv_heads, p.block_size, kHeadDim);
  };
  // K tile t goes to K stage t % 2 and V tile t to V stage t % 2, but V is fetched one
  // iteration later than K (see the loop), so each buffer is free when it is refilled.
  auto load_rows = [&](const void* cache, T* dst, int tile) {
    const int key0 = tile * kBlockN;
    const T* base = static_cast<const T*>(cache);
    const T* r0 = cache_rows(base, key0);
    const T* r1 = key0 + 64 < kv_len ? cache_rows(base, key0 + 64) : r0;  // never past the end
    if (copies) {
      load_tile_async<TileLayout::kSw128, kBlockN, kHeadDim, kCopyThreads>(dst, kv_len - key0, r0,
                                                                           r1, kHeadDim);
    }
  };
  auto k_stage = [&](int tile) { return sk + (tile & 1) * kBlockN * kHeadDim; };
  auto v_stage = [&](int tile) { return sv + (tile & 1) * kBlockN * kHeadDim; };
  if (num_tiles > 0) load_rows(p.k_cache, k_stage(0), 0);
  cp_async_commit();

  const int warpgroup = threadIdx.x / 128;
  const int warp = (threadIdx.x / 32) % 4;  // within the warpgroup
  const int lane = threadIdx.x % 32;
  const int thread_row = warpgroup * 64 + warp * 16 + (lane >> 2);  // + 8 for h = 1
  const float scale_log2 = p.softmax_scale * kLog2e;

  float o[kORegs];
  float s[kSRegs];
  uint32_t pf[kBlockN / 16][4];  // P of the previous tile, as wgmma A fragments
#pragma unroll
  for (int i = 0; i < kORegs; ++i) o[i] = 0.f;
#pragma unroll
  for (int i = 0; i < kSRegs; ++i) s[i] = 0.f;
  float row_max[2] = {kNegInf, kNegInf};
  float row_sum[2] = {0.f, 0.f};

  // Waits for this thread's copies, hands them to the async proxy, then a CTA barrier (which
  // also tells every warpgroup that the others are done with the buffers refilled next).
  auto tiles_landed = [&] {
    cp_async_wait<0>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
  };
  auto issue_s = [&](const T* k_tile) {  // S = Q K^T (async)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint64_t desc_q =
          sw128_desc(sq + (kk >> 2) * kBlockM * 64 + warpgroup * 64 * 64 + (kk & 3) * 16, 16, 1024);
      const uint64_t desc_k = sw128_desc(k_tile + (kk >> 2) * kBlockN * 64 + (kk & 3) * 16, 16, 1024);
      wgmma_ss<T, kBlockN>(s, desc_q, desc_k, kk > 0 ? 1 : 0);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  };
  auto issue_pv = [&](const T* v_tile) {  // O += P V (async)
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      wgmma_rs_tn<T, kHeadDim>(o, pf[ks], sw128_desc(v_tile + ks * 16 * 64, kBlockN * 128, 1024));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  };
  // Mask and online softmax of tile n in s (probabilities overwrite the scores); returns the
  // factor by which O must be rescaled before this tile's P V is added.
  auto softmax = [&](int n, float (&correction)[2]) {
    const int key0 = n * kBlockN;
    const bool crosses_end = key0 + kBlockN > kv_len;
    const bool crosses_diagonal = p.causal && key0 + kBlockN - 1 > q_offset + m_base;
    if (crosses_end || crosses_diagonal) {
#pragma unroll
      for (int i = 0; i < kSRegs; ++i) {
        const int key = key0 + (i / 4) * 8 + 2 * (lane & 3) + (i & 1);
        const int row = m_base + thread_row + ((i >> 1) & 1) * 8;
        const bool visible = key < kv_len && (!p.causal || key <= q_offset + row);
        if (!visible) s[i] = kNegInf;
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // see attention_prefill.cuh for the -inf handling
      float m_new = row_max[h];
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        m_new = fmaxf(m_new, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
      }
      m_new = quad_max(m_new);
      const float m_scaled = m_new == kNegInf ? 0.f : m_new * scale_log2;
      correction[h] = fast_exp2(row_max[h] * scale_log2 - m_scaled);
      row_max[h] = m_new;
      float tile_sum = 0.f;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          s[4 * j + e] = fast_exp2(fmaf(s[4 * j + e], scale_log2, -m_scaled));
          tile_sum += s[4 * j + e];
        }
      }
      row_sum[h] = row_sum[h] * correction[h] + tile_sum;
    }
  };
  auto rescale_o_and_pack_p = [&](const float (&correction)[2]) {
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      o[4 * j + 0] *= correction[0];
      o[4 * j + 1] *= correction[0];
      o[4 * j + 2] *= correction[1];
      o[4 * j + 3] *= correction[1];
    }
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      pf[ks][0] = Traits::pack(s[8 * ks + 0], s[8 * ks + 1]);
      pf[ks][1] = Traits::pack(s[8 * ks + 2], s[8 * ks + 3]);
      pf[ks][2] = Traits::pack(s[8 * ks + 4], s[8 * ks + 5]);
      pf[ks][3] = Traits::pack(s[8 * ks + 6], s[8 * ks + 7]);
    }
  };

  // Software pipeline (per warpgroup): in iteration n the tensor cores run S_n = Q K_n^T and
  // then O += P_{n-1} V_{n-1} while the warpgroup's threads compute the softmax of S_n as soon
  // as S_n is done, so the exp/max/sum work hides behind the PV product. The copies of
  // K_{n+1} and V_n run underneath both.
  if (num_tiles > 0) {
    tiles_landed();
    if (num_tiles > 1) load_rows(p.k_cache, k_stage(1), 1);
    load_rows(p.v_cache, v_stage(0), 0);
    cp_async_commit();
    issue_s(k_stage(0));
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    fence_operands(s);
    float correction[2];
    softmax(0, correction);
    rescale_o_and_pack_p(correction);
  }
  for (int n = 1; n < num_tiles; ++n) {
    tiles_landed();  // K_n and V_{n-1}
    if (n + 1 < num_tiles) load_rows(p.k_cache, k_stage(n + 1), n + 1);
    load_rows(p.v_cache, v_stage(n), n);
    cp_async_commit();
    fence_operands(o);
    issue_s(k_stage(n));
    issue_pv(v_stage(n - 1));
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // S_n done
    fence_operands(s);
    float correction[2];
    softmax(n, correction);
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");  // P_{n-1} V_{n-1} done
    fence_operands(o);
    rescale_o_and_pack_p(correction);
  }
  if (num_tiles > 0) {
    tiles_landed();  // V_{last}
    fence_operands(o);
    issue_pv(v_stage(num_tiles - 1));
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    fence_operands(o);
  }
  cp_async_wait<0>();

  // ---- epilogue: out = O / l, lse = m * scale + log(l) ----
  T* out = static_cast<T*>(p.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = quad_sum(row_sum[h]);
    const float inv_l = l > 0.f ? 1.f / l : 0.f;
    const int row = m_base + thread_row + h * 8;
    if (row >= q_len) continue;
    const int64_t token = q_start + row;
    T* dst = out + (token * p.num_heads + head) * kHeadDim + 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      *reinterpret_cast<uint32_t*>(dst + j * 8) =
          Traits::pack(o[4 * j + 2 * h] * inv_l, o[4 * j + 2 * h + 1] * inv_l);
    }
    if (p.lse != nullptr && (lane & 3) == 0) {
      p.lse[token * p.num_heads + head] = l > 0.f ? row_max[h] * p.softmax_scale + logf(l) : kNegInf;
    }
  }
#else
  __trap();  // only built for sm_90a; the launcher never selects it elsewhere
#endif
}

}  // namespace flashserve::kernels::device
