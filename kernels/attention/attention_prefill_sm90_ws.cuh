#pragma once
// Fused FlashAttention forward for prefill, Hopper path, warp-specialized (a producer
// warpgroup feeding 2 consumer warpgroups at head_dim 128, 3 at head_dim 64). Its history and
// measurements are in bench/attention/NOTES.md.
//
// Same algorithm and numerics as the portable kernel (kernels/attention/attention_prefill.cuh), on
// Hopper's wgmma: 128 query rows per CTA at d128 (2 consumer warpgroups x 64 rows), 128-key
// K/V tiles in wgmma's 128-byte-swizzled layout (kernels/sm90_wgmma.cuh), S = Q K^T from
// shared memory and O += P V with P from registers. How the tiles arrive and how the
// warpgroups are scheduled:
//
//   * Threads 0-255 = 2 consumer warpgroups; threads 256-383 = 1 producer warpgroup that issues
//     every copy (Q once, then K_0, K_1, V_0, K_2, V_1, ... in the consumers' order) into a
//     ring of kStages K buffers and kStages V buffers. No __syncthreads in the main loop:
//     each buffer has a "full" mbarrier (producer -> consumers) and an "empty" mbarrier
//     (all 256 consumer threads arrive when their wgmma reading it has completed).
//   * K/V tiles come by TMA (cp.async.bulk.tensor) through one tensor map per cache over the
//     whole paged cache (kernels/attention/attention_prefill.cu, cache_tensor_map: rows
//     [blocks x kv heads x block_size, head_dim], 64 x 64 boxes in the 128-byte swizzle, the
//     layout the consumers' wgmma descriptors read). A 128-key tile is two 64-row halves, each
//     64 contiguous rows of one cache block, so producer thread 0 adds the tile's bytes to its
//     "full" mbarrier (expect-tx) and issues head_dim / 64 boxes per half at the row its
//     block-table entry gives; the barrier completes when the bytes have landed. TMA cannot
//     zero rows, so two kinds of tile come by cp.async (16 B, src-size 0 for the rows to zero)
//     with the addresses computed by all 128 producer threads: the one holding the sequence's
//     end (V rows past kv_len must be 0: the cache holds anything, NaN in the tests, and
//     0 x NaN is NaN) and a window's first (a half wholly before the window is zero-filled and
//     its block never read). Q comes by cp.async too (once a CTA). Measured: 1.01-1.25x the
//     all-cp.async producer on every Hopper row (bench/attention/NOTES.md, v12).
//   * Proxy ordering (PTX ISA, "Proxies" and fence.proxy.async): wgmma reads shared memory
//     through the async proxy, as TMA writes it; cp.async writes it through the generic
//     proxy, so for those tiles each producer thread waits for its group, fences
//     (fence.proxy.async.shared::cta) and only then arrives. A "full" barrier counts 128
//     arrivals, one per producer thread and tile: for a TMA tile at once (thread 0's after
//     its expect-tx, so the phase cannot complete before the bytes are counted); for a
//     cp.async group one group late, when group g+1 has been issued (cp.async.wait_group 1)
//     or when a TMA tile comes next (which first waits for all groups). The order above keeps
//     that deadlock-free with 2 stages (the consumer never needs the newest group before
//     releasing the buffer the producer waits for).
//   * Ping-pong: named barriers 1 and 2 order the two consumer warpgroups' GEMM issue
//     (FA3): warpgroup w waits on barrier 1+w, issues S_n = Q K_n^T and O += P_{n-1} V_{n-1},
//     then arrives on the other's barrier, so one warpgroup's softmax runs while the other's
//     GEMMs occupy the tensor cores. Warpgroup 1 pre-arrives once and skips its last arrive,
//     so both barriers end balanced.
//   * setmaxnreg: the producer hands registers to the consumers inside the pool the CTA is
//     launched with (the budgets: attention_prefill_sm90_shape.cuh). A lone producer warp
//     (288 threads) does not help: 9 warps over 4 SM sub-partitions cap registers at 168 too.
//   * Sliding window: as in the portable kernel, the tiles start at the one holding the
//     window start of the CTA's first row. A 128-key tile spans two 64-row cache blocks; when
//     the first lies wholly before that window start the producer zero-fills its rows instead
//     of copying them (and never reads its block table entry), so blocks before the window
//     are never touched (kernels/attention/attention.h's contract).
//   * head_dim 64 (FA3's hdim-64 shape): 3 consumer warpgroups = 192 query rows x 128 keys,
//     512 threads. Each K/V tile then serves 192 rows, and two warpgroups' softmax can run
//     under the third's GEMMs (at d64 a tile's GEMMs take half as long as at d128 while the
//     softmax costs the same). The ping-pong turns go round-robin 0 -> 1 -> 2 -> 0.
//   * Per-warpgroup tile count: a warpgroup computes only the key tiles its own 64 rows need
//     (up to its last row's diagonal under the causal mask; none when its rows are all past
//     the block's, as in a sequence's first, partial block: row blocks are aligned to the
//     sequence's end, geometry() below). Past them it still waits for each K/V tile,
//     releases its buffers and takes its turns empty, so the ring's phases and the turn order
//     stay the CTA's. At d64 causal this spares the first warpgroup of a 192-row block up to
//     two tiles past its diagonal (v18 in bench/attention/NOTES.md).
//   * Split prefill (num_splits > 1, grid x = row blocks x splits): split s of a row block
//     takes an equal share of its key tiles (none when they are fewer than the splits) and
//     writes fp32 partials, O normalised over its keys and the LSE (-inf for a row that sees
//     none of them), for attention_prefill_combine_kernel (attention_combine.cuh). A row
//     block whose CTA would walk many tiles while most SMs idle gets its SMs back that way.
//   * Output: a warpgroup whose 64 rows all belong to the block (all but a sequence's first,
//     partial block) writes its bf16/fp16 output into its own rows of the Q tile (free after
//     its last S) in the tile's 128-byte swizzle, and one thread stores it by TMA through a
//     third tensor map over the output (attention_prefill.cu, output_tensor_map); only that
//     thread waits, and only until the tile is read. A partial block, the split's fp32
//     partials and an output not 16-byte aligned are stored from registers. The exit drain of
//     a one-tile CTA's register stores was time the SM lost (v20 in bench/attention/NOTES.md).
#include <cuda.h>  // CUtensorMap

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_common.cuh"
#include "kernels/attention/attention_mask.h"
#include "kernels/attention/attention_prefill_sm90_shape.cuh"
#include "kernels/attention/attention_prefill_sm90_walks.cuh"
#include "kernels/attention/fast_divmod.h"
#include "kernels/attention/row_blocks.h"
#include "kernels/paged_kv.h"
#include "kernels/sm90_wgmma.cuh"

namespace flashserve::kernels::device {



// load_tile_async for kThreads threads numbered tid (kSw128 layout): thread copies chunk
// tid % C (C = kHeadDim / 8 chunks per row) of rows tid / C + i * R (R = kThreads / C rows per
// step). row % 8 takes J = max(1, 8 / R) values per thread, so it keeps J destination bases and
// every copy is one cp.async at an immediate offset from one of them. Rows outside
// [first_valid_row, valid_rows) are zero-filled (lo is then only a dummy source address).
template <int kRows, int kHeadDim, int kThreads, typename T>
__device__ __forceinline__ void load_tile_group(T* tile, int first_valid_row, int valid_rows,
                                                const T* lo, const T* hi, int64_t row_stride,
                                                int tid) {
  constexpr int C = kHeadDim / 8;
  constexpr int R = kThreads / C;
  constexpr int J = R >= 8 ? 1 : 8 / R;
  static_assert(kThreads % C == 0 && (8 % R == 0 || R % 8 == 0) && 64 % R == 0,
                "rows per step must divide or be a multiple of 8, and divide 64");
  const int c = tid % C;
  const int r0 = tid / C;
  uint32_t dst[J];
#pragma unroll
  for (int j = 0; j < J; ++j) {
    dst[j] = smem_addr(tile + tile_offset<TileLayout::kSw128, kRows, kHeadDim>(r0 + j * R, c * 8));
  }
  const T* src_lo = lo + r0 * row_stride + c * 8;
  const T* src_hi = hi + r0 * row_stride + c * 8;
#pragma unroll
  for (int i = 0; i < kRows / R; ++i) {
    const int row0 = i * R;  // compile-time
    const bool valid = r0 + row0 >= first_valid_row && r0 + row0 < valid_rows;
    const T* src = row0 < 64 ? src_lo + row0 * row_stride : src_hi + (row0 - 64) * row_stride;
    cp_async_16(dst[i % J] + 2 * ((i / J) * J * R * 64), valid ? src : src_lo, valid);
  }
}

// kSplit: the split prefill's instantiation (num_splits > 1, the partials' epilogue); the
// other one is the kernel without any of it (a second mode is a kernel of its own:
// CONTRIBUTING.md; as a runtime branch it cost the one-split rows 3-4 %, NOTES.md v19).
// kWalk: the grid's form (attention_prefill_sm90_walks.cuh).

template <typename T, int kHeadDim, bool kSplit, Sm90Walk kWalk = Sm90Walk::kOneTile>
__global__ void __launch_bounds__(sm90ws_threads(kHeadDim), 1)
    attention_prefill_sm90_ws_kernel(const AttentionParams p,
                                     const __grid_constant__ CUtensorMap k_map,
                                     const __grid_constant__ CUtensorMap v_map,
                                     const __grid_constant__ CUtensorMap o_map, bool o_by_tma,
                                     int num_splits,
                                     float* o_partial, float* lse_partial) {
#ifdef FLASHSERVE_SM90A
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128");
  constexpr int kBlockM = sm90ws_block_m(kHeadDim);
  constexpr int kBlockN = sm90ws_block_n();
  constexpr int kStages = sm90ws_stages();
  constexpr int kConsumers = sm90ws_consumer_threads(kHeadDim);
  constexpr int kWarpgroups = sm90ws_consumer_warpgroups(kHeadDim);
  constexpr int kSRegs = kBlockN / 2;
  constexpr int kORegs = kHeadDim / 2;
  constexpr int kTile = kBlockN * kHeadDim;  // elements per K or V buffer
  using Traits = DTypeTraits<T>;
  constexpr bool kPersistent = kWalk != Sm90Walk::kOneTile;
  constexpr bool kCounter = kWalk == Sm90Walk::kCounter;
  constexpr bool kStreamK = kWalk == Sm90Walk::kStreamK;

  static_assert(!(kSplit && kPersistent), "the split grid is under one wave: not persistent");
  // Longest (causal) row blocks first; with splits, a row block's splits side by side.
  const int split = kSplit ? blockIdx.x % num_splits : 0;
  // The walk (one tile, the CTA's own, when not persistent; attention_prefill_sm90_walks.cuh
  // has the persistent ones).
  const int row_blocks = (p.max_seqlen_q + kBlockM - 1) / kBlockM;
  const int walk_tiles = kPersistent ? row_blocks * p.num_heads * p.num_seqs : 1;
  const int walk_grid = kPersistent ? static_cast<int>(gridDim.x) : 1;
  const int walk_rounds = (walk_tiles + walk_grid - 1) / walk_grid;
  // The walk's divisors, fixed for the kernel: each role divides by them for every tile
  // (fast_divmod.h); the one-tile CTA divides once and keeps plain divisions.
  const FastDivmod grid_div(kPersistent ? walk_grid : 1);
  const FastDivmod row_blocks_div(kPersistent ? row_blocks : 1);
  const FastDivmod heads_div(kPersistent ? p.num_heads : 1);
  const FastDivmod group_div(kPersistent ? p.num_heads / p.num_kv_heads : 1);
  auto walk_tile = [&](int k) {
    if constexpr (kPersistent) {
      int rotated;
      grid_div.divmod(static_cast<int>(blockIdx.x) + k, rotated);
      return k * walk_grid + rotated;
    }
    return 0;
  };
  const Sm90StreamK stream_k(kStreamK, walk_tiles, walk_grid,
                             (p.max_seqlen_k + kBlockN - 1) / kBlockN, static_cast<int>(blockIdx.x));
  struct Geometry {
    int seq, head, q_start, q_len, m_base, kv_len, q_offset, kv_head, rows, window,
        window_start, first_tile, num_tiles;
  };
  // Tile l's rows and key tiles, a pure function of l that the producer and the consumers each
  // compute. Row blocks are aligned to the sequence's end (row_blocks.h).
  auto geometry = [&](int l) {
    Geometry g;
    int from_end;
    if constexpr (kPersistent) {
      const int head_seq = row_blocks_div.divmod(l, from_end);  // l = head_seq * row_blocks + ..
      g.seq = heads_div.divmod(head_seq, g.head);
    } else {
      g.seq = blockIdx.z;
      g.head = blockIdx.y;
      from_end = kSplit ? blockIdx.x / num_splits : blockIdx.x;
    }
    g.q_start = p.cu_seqlens_q[g.seq];
    g.q_len = p.cu_seqlens_q[g.seq + 1] - g.q_start;
    const RowBlock rb = row_block_from_end(g.q_len, from_end, kBlockM);
    g.m_base = rb.m_base;
    g.rows = rb.rows;
    g.kv_len = p.seqlens_k[g.seq];
    g.q_offset = g.kv_len - g.q_len;
    if constexpr (kPersistent) {
      g.kv_head = group_div.div(g.head);
    } else {
      g.kv_head = g.head / (p.num_heads / p.num_kv_heads);
    }
    const int n_end = p.causal ? min(g.kv_len, g.q_offset + g.m_base + g.rows) : g.kv_len;
    g.window = window_keys(p.sliding_window);
    g.window_start = max(0, g.q_offset + g.m_base - g.window + 1);  // of the tile's first row
    // The tile's key tiles, from first_tile: split `split` of num_splits takes an equal share
    // of the row block's tiles (none when they are fewer than the splits).
    g.first_tile = g.window_start / kBlockN;
    g.num_tiles = max(0, (n_end + kBlockN - 1) / kBlockN - g.first_tile);
    if constexpr (kSplit) {
      const int block_tiles = g.num_tiles;
      const int split_tiles = (block_tiles + num_splits - 1) / num_splits;
      g.first_tile += min(block_tiles, split * split_tiles);
      g.num_tiles = max(0, min(block_tiles - split * split_tiles, split_tiles));
    }
    return g;
  };
  // The one-tile CTA's geometry, computed once before the roles part (the walk computes each
  // tile's in each role).
  Geometry g0;
  if constexpr (!kPersistent) {
    g0 = geometry(0);
    if (g0.rows <= 0) return;  // whole CTA, before any barrier
  }

  extern __shared__ uint4 smem_raw[];
  const uint32_t pad = (1024u - (smem_addr(smem_raw) & 1023u)) & 1023u;
  T* sq = reinterpret_cast<T*>(reinterpret_cast<char*>(smem_raw) + pad);
  T* sk = sq + kBlockM * kHeadDim;      // [kStages][kTile]
  T* sv = sk + kStages * kTile;         // [kStages][kTile]
  T* sq1 = sv + kStages * kTile;        // persistent: the second Q buffer
  // Tile r of the walk (r = q_round: the tiles with keys before it) reads Q buffer r & 1.
  auto q_buf = [&](int b) { return b == 0 ? sq : sq1; };
  const uint32_t bars =
      smem_addr(kPersistent ? sq1 + kBlockM * kHeadDim : sv + kStages * kTile);  // mbarriers:
  // Q buffer b's k-th fill (tile 2k + b's Q) completes phase k & 1 of q_full(b); its release
  // (persistent: every consumer thread done with the tile, its TMA store read included)
  // phase k & 1 of q_empty(b).
  auto q_full = [&](int b) { return b == 0 ? bars : bars + 8 * (1 + 4 * kStages); };
  auto k_full = [&](int s) { return bars + 8 * (1 + s); };
  auto k_empty = [&](int s) { return bars + 8 * (1 + kStages + s); };
  auto v_full = [&](int s) { return bars + 8 * (1 + 2 * kStages + s); };
  auto v_empty = [&](int s) { return bars + 8 * (1 + 3 * kStages + s); };
  auto q_empty = [&](int b) { return bars + 8 * (2 + 4 * kStages + b); };
  // Persistent: the tile of the walk's tile r, in slot r & 1 (a list index, or -1 for the
  // walk's end), written by the producer's thread 0 once Q buffer r & 1 is free (q_empty:
  // the consumers have long read the slot's previous tile) and published by its arrival on
  // id_full(r & 1) (release; the consumers' wait acquires), phase (r >> 1) & 1. Both sit in
  // the barriers' 256 bytes.
  auto id_full = [&](int b) { return bars + 8 * (4 + 4 * kStages + b); };
  volatile int* const tile_slot =
      reinterpret_cast<volatile int*>(sq1 + kBlockM * kHeadDim) + 2 * (6 + 4 * kStages);
  // Named barrier of the producer's 128 threads (the turns take 1..kWarpgroups, the consumers'
  // epilogues kWarpgroups + 1.. 2 kWarpgroups).
  constexpr int kProducerBar = 8;
  if (threadIdx.x == 0) {
    mbar_init(q_full(0), 128);
    if constexpr (kPersistent) {
      mbar_init(q_full(1), 128);
      mbar_init(q_empty(0), kConsumers);
      mbar_init(q_empty(1), kConsumers);
      if constexpr (kCounter) {
        mbar_init(id_full(0), 1);
        mbar_init(id_full(1), 1);
      }
    }
    for (int s = 0; s < kStages; ++s) {
      mbar_init(k_full(s), 128);
      mbar_init(v_full(s), 128);
      mbar_init(k_empty(s), kConsumers);
      mbar_init(v_empty(s), kConsumers);
    }
  }
  __syncthreads();  // the only CTA-wide barrier

  if (threadIdx.x >= kConsumers) {
    // ---------------- producer warpgroup (128 threads issue every copy) ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(sm90ws_producer_regs(kHeadDim)));
    const int tid = threadIdx.x - kConsumers;
    const int64_t q_row_stride = static_cast<int64_t>(p.num_heads) * kHeadDim;
    // cp.async group g is signalled once group g + 1 is in flight, or before the next TMA
    // tile's arrivals (flush), or at the end (header comment, proxy ordering).
    uint32_t prev_bar = 0;
    bool have_prev = false;
    auto issued = [&](uint32_t bar) {
      cp_async_commit();
      if (have_prev) {
        cp_async_wait<1>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        mbar_arrive(prev_bar);
      }
      prev_bar = bar;
      have_prev = true;
    };
    auto flush = [&] {
      if (!have_prev) return;
      cp_async_wait<0>();
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      mbar_arrive(prev_bar);
      have_prev = false;
    };
    // ring: the K/V tiles of the walk's earlier tiles (K or V tile j of the walk sits in stage
    // j % kStages, phase (j / kStages) & 1); q_round: the tiles with keys before this one.
    int ring = 0;
    int q_round = 0;
    // (kCounter: k counts nothing; the walk ends at the take of -1.)
    int64_t sk_u = kStreamK ? stream_k.start(static_cast<int>(blockIdx.x)) : 0;
    for (int k = 0; kCounter || kStreamK || k < walk_rounds; ++k) {
    // Q buffer qb is overwritten only once every consumer thread is done with tile
    // q_round - 2 (its output's TMA store read included).
    const int qb = q_round & 1;
    int l;
    int kb0 = 0, kb1 = 0;
    if constexpr (kCounter) {
      if (q_round >= 2) mbar_wait(q_empty(qb), ((q_round - 2) >> 1) & 1);
      if (tid == 0) {
        // The next tile with keys (every tile with rows has some: kv_len >= q_len), or -1.
        for (;;) {
          l = static_cast<int>(atomicAdd(&sm90ws_tile_counter, 1u));
          if (l >= walk_tiles) break;
          const Geometry t = geometry(l);
          if (t.rows > 0 && t.num_tiles > 0) break;
        }
        if (l >= walk_tiles) {
          if (l == walk_tiles + static_cast<int>(gridDim.x) - 1) {
            atomicExch(&sm90ws_tile_counter, 0u);  // the launch's last take
          }
          l = -1;
        }
        tile_slot[qb] = l;
        mbar_arrive(id_full(qb));
      }
      named_bar_sync(kProducerBar, 128);  // the slot, to the producer's other threads
      l = tile_slot[qb];
      if (l < 0) break;
    } else if constexpr (kStreamK) {
      if (!stream_k.item(k, sk_u, l, kb0, kb1, walk_tile)) break;
    } else {
      l = walk_tile(k);
      if (l >= walk_tiles) continue;
    }
    Geometry g = kPersistent ? geometry(l) : g0;
    if constexpr (kStreamK) Sm90StreamK::clip(kb0, kb1, g.first_tile, g.num_tiles);
    if (g.rows <= 0) continue;  // (persistent only: the one-tile CTA has returned)
    if (g.num_tiles == 0) {
      if constexpr (kPersistent) continue;  // (kStatic only: kCounter takes none such)
      return;
    }
    const T* q_base = static_cast<const T*>(p.q) +
                      (static_cast<int64_t>(g.q_start + g.m_base) * p.num_heads + g.head) *
                          kHeadDim;
    const int32_t* table = p.block_tables + static_cast<int64_t>(g.seq) * p.max_blocks_per_seq;
    auto cache_rows = [&](const T* cache, int key) {
      return cache + kv_cache_offset(table[key / p.block_size], g.kv_head, key % p.block_size,
                                     p.num_kv_heads, p.block_size, kHeadDim);
    };
    // A tile whose two 64-row halves are whole (neither wholly before the window, both
    // before kv_len) comes by TMA; any other by cp.async with per-row zero fill (header).
    auto tma_tile = [&](int tile) {
      const int key0 = (g.first_tile + tile) * kBlockN;
      return key0 + 64 > g.window_start && key0 + kBlockN <= g.kv_len;
    };
    auto load_kv_cp = [&](const void* cache, T* dst, int tile) {
      const int key0 = (g.first_tile + tile) * kBlockN;
      const T* base = static_cast<const T*>(cache);
      // First half wholly before the window: zero-filled; then key0 + 64 <= window_start <
      // kv_len, so the second half exists and serves as the dummy source.
      const bool skip_lo = key0 + 64 <= g.window_start;
      const T* r1 = key0 + 64 < g.kv_len ? cache_rows(base, key0 + 64) : nullptr;  // not past the end
      const T* r0 = skip_lo ? r1 : cache_rows(base, key0);
      load_tile_group<kBlockN, kHeadDim, 128>(dst, skip_lo ? 64 : 0, g.kv_len - key0, r0,
                                              r1 != nullptr ? r1 : r0, kHeadDim, tid);
    };
    auto load_kv_tma = [&](const CUtensorMap* map, T* dst, int tile, uint32_t bar) {
      const int key0 = (g.first_tile + tile) * kBlockN;
      mbar_expect_tx(bar, kBlockN * kHeadDim * 2);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int key = key0 + 64 * h;
        const int row = (table[key / p.block_size] * p.num_kv_heads + g.kv_head) * p.block_size +
                        key % p.block_size;
#pragma unroll
        for (int c = 0; c < kHeadDim / 64; ++c) {
          tma_load_2d(smem_addr(dst + c * kBlockN * 64 + h * 64 * 64), map, 64 * c, row, bar);
        }
      }
    };
    auto load_kv = [&](const void* cache, const CUtensorMap* map, T* dst, int tile,
                       uint32_t bar) {
      if (tma_tile(tile)) {
        if (tid == 0) load_kv_tma(map, dst, tile, bar);
        flush();
        mbar_arrive(bar);
      } else {
        load_kv_cp(cache, dst, tile);
        issued(bar);
      }
    };
    if ((kWalk == Sm90Walk::kStatic || kStreamK) && q_round >= 2) {
      mbar_wait(q_empty(qb), ((q_round - 2) >> 1) & 1);
    }
    load_tile_group<kBlockM, kHeadDim, 128>(q_buf(qb), 0, g.rows, q_base,
                                            q_base + 64 * q_row_stride, q_row_stride, tid);
    issued(q_full(qb));
    auto load_k = [&](int t) {
      const int j = ring + t;
      const int s = j % kStages;
      if (j >= kStages) mbar_wait(k_empty(s), ((j / kStages) - 1) & 1);
      load_kv(p.k_cache, &k_map, sk + s * kTile, t, k_full(s));
    };
    load_k(0);
    for (int t = 1; t <= g.num_tiles; ++t) {
      if (t < g.num_tiles) load_k(t);
      const int j = ring + t - 1;
      const int s = j % kStages;
      if (j >= kStages) mbar_wait(v_empty(s), ((j / kStages) - 1) & 1);
      load_kv(p.v_cache, &v_map, sv + s * kTile, t - 1, v_full(s));
    }
    ring += g.num_tiles;
    ++q_round;
    }  // walk
    flush();
  } else {
  // ---------------- consumer warpgroups ----------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(sm90ws_consumer_regs(kHeadDim)));
  // Broadcast from lane 0 so that ptxas sees it warp-uniform: the branches on my_tiles below
  // hold wgmma, which it would otherwise serialize as a divergent path.
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  const int warp = (threadIdx.x / 32) % 4;
  const int lane = threadIdx.x % 32;
  const int thread_row = warpgroup * 64 + warp * 16 + (lane >> 2);  // + 8 for h = 1
  const float scale_log2 = p.softmax_scale * kLog2e;
  int ring = 0;     // as the producer's: the K/V tiles of the walk's earlier tiles
  int q_round = 0;  // and the tiles with keys before this one
  // The GEMM-issue turns (below): a one-tile CTA's last warpgroup pre-arrives on warpgroup
  // 0's barrier at the tile's start and skips its last region's hand-over. The walk instead
  // runs the turns on across its tiles: one pre-arrive before the walk, every region hands
  // over (the last warpgroup's last hand-over of a tile is the next tile's pre-arrive, made
  // before its epilogue and the next tile's geometry loads, so warpgroup 0 need not wait for
  // them), and warpgroup 0 takes the one hand-over left at the walk's end.
  if (kPersistent && warpgroup == kWarpgroups - 1) named_bar_arrive(1, 256);
  int64_t sk_u = kStreamK ? stream_k.start(static_cast<int>(blockIdx.x)) : 0;
  for (int k = 0; kCounter || kStreamK || k < walk_rounds; ++k) {
  int l;
  int kb0 = 0, kb1 = 0;
  if constexpr (kCounter) {
    mbar_wait(id_full(q_round & 1), (q_round >> 1) & 1);
    l = tile_slot[q_round & 1];
    if (l < 0) break;
  } else if constexpr (kStreamK) {
    if (!stream_k.item(k, sk_u, l, kb0, kb1, walk_tile)) break;
  } else {
    l = walk_tile(k);
    if (l >= walk_tiles) continue;
  }
  Geometry g = kPersistent ? geometry(l) : g0;
  if (g.rows <= 0) continue;  // (persistent only: the one-tile CTA has returned)
  const int tile_key_tiles = g.num_tiles;  // kStreamK: the whole tile's, before the clip
  if constexpr (kStreamK) {  // as the producer's
    Sm90StreamK::clip(kb0, kb1, g.first_tile, g.num_tiles);
    if (g.num_tiles == 0) continue;  // a piece past a shorter sequence's keys: none
  }
  // kStreamK: a piece after the tile's first keys leaves its partial; the one with them
  // merges the tile's others (when it is not the whole tile).
  const bool sk_rest = kStreamK && kb0 > 0;
  const bool sk_first = kStreamK && kb0 == 0 && kb1 < stream_k.units;
  const int seq = g.seq, head = g.head, q_start = g.q_start;
  const int m_base = g.m_base, m_end = g.m_base + g.rows;
  const int kv_len = g.kv_len, q_offset = g.q_offset, window = g.window;
  const int first_tile = g.first_tile, num_tiles = g.num_tiles;
  (void)seq;
  const int qb = q_round & 1;
  T* const sq_t = q_buf(qb);  // this tile's Q
  // The key tiles this warpgroup's 64 rows need, from first_tile (<= num_tiles): none for rows
  // past the block's (m_end), under the causal mask only up to its last row's diagonal. The
  // tiles after them are wholly masked for these rows (they would add exactly 0 with a
  // correction of exactly 1): the warpgroup only takes its turns and releases their buffers.
  const int wg_rows = min(64, m_end - m_base - 64 * warpgroup);
  const int wg_end = p.causal ? min(kv_len, q_offset + m_base + 64 * warpgroup + wg_rows) : kv_len;
  int my_tiles = wg_rows <= 0 ? 0 : max(0, (wg_end + kBlockN - 1) / kBlockN - first_tile);
  if constexpr (kSplit || kStreamK) my_tiles = min(num_tiles, my_tiles);  // past the share

  float o[kORegs];
  float s[kSRegs];
  uint32_t pf[kBlockN / 16][4];
#pragma unroll
  for (int i = 0; i < kORegs; ++i) o[i] = 0.f;
#pragma unroll
  for (int i = 0; i < kSRegs; ++i) s[i] = 0.f;
  float row_max[2] = {kNegInf, kNegInf};
  float row_sum[2] = {0.f, 0.f};

  auto issue_s = [&](const T* k_tile) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 16; ++kk) {
      const uint64_t desc_q =
          sw128_desc(sq_t + (kk >> 2) * kBlockM * 64 + warpgroup * 64 * 64 + (kk & 3) * 16, 16, 1024);
      const uint64_t desc_k = sw128_desc(k_tile + (kk >> 2) * kBlockN * 64 + (kk & 3) * 16, 16, 1024);
      wgmma_ss<T, kBlockN>(s, desc_q, desc_k, kk > 0 ? 1 : 0);
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  };
  auto issue_pv = [&](const T* v_tile) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      wgmma_rs_tn<T, kHeadDim>(o, pf[ks], sw128_desc(v_tile + ks * 16 * 64, kBlockN * 128, 1024));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  };
  // The first position (q_offset + row) of this warpgroup's 64 rows: whether a tile needs the
  // mask is asked of them, not of the whole row block (under the causal mask the block's later
  // warpgroups see whole tiles that cross its first row's diagonal).
  const int wg_pos0 = q_offset + m_base + 64 * warpgroup;
  auto softmax = [&](int n, float (&correction)[2]) {
    const int key0 = (first_tile + n) * kBlockN;
    const bool crosses_end = key0 + kBlockN > kv_len;
    const bool crosses_diagonal = p.causal && key0 + kBlockN - 1 > wg_pos0;
    const bool crosses_window = wg_pos0 + 63 - key0 >= window;
    if (crosses_end || crosses_diagonal || crosses_window) {
      // S element i of this thread holds key kbase + c(i), c(i) = (i / 4) * 8 + (i & 1) (a
      // constant of the unrolled loop), in its row h = (i >> 1) & 1 (attention_mask.h).
      const int kbase = key0 + 2 * (lane & 3);
      const int pos = q_offset + m_base + thread_row;
      const KeyOffsets rows[2] = {visible_key_offsets(pos, kbase, kv_len, p.causal, window),
                                  visible_key_offsets(pos + 8, kbase, kv_len, p.causal, window)};
#pragma unroll
      for (int i = 0; i < kSRegs; ++i) {
        const int c = (i / 4) * 8 + (i & 1);
        s[i] = offset_visible(rows[(i >> 1) & 1], c) ? s[i] : kNegInf;
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
  auto rescale_o = [&](const float (&correction)[2]) {
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      o[4 * j + 0] *= correction[0];
      o[4 * j + 1] *= correction[0];
      o[4 * j + 2] *= correction[1];
      o[4 * j + 3] *= correction[1];
    }
  };
  auto pack_p = [&] {
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      pf[ks][0] = Traits::pack(s[8 * ks + 0], s[8 * ks + 1]);
      pf[ks][1] = Traits::pack(s[8 * ks + 2], s[8 * ks + 3]);
      pf[ks][2] = Traits::pack(s[8 * ks + 4], s[8 * ks + 5]);
      pf[ks][3] = Traits::pack(s[8 * ks + 6], s[8 * ks + 7]);
    }
  };
  // GEMM-issue turns (ping-pong, round-robin over the consumer warpgroups): region r of
  // warpgroup w waits on barrier 1 + w (256 threads: w and the one before it) and, except the
  // last warpgroup's last region, hands the turn to warpgroup (w + 1) % kWarpgroups afterwards.
  // Regions: one per key tile (its S, and from the second on the previous P V), then the last
  // P V alone, so every GEMM issue takes its turn (speed unchanged against issuing the last
  // P V outside the turns, NOTES.md v15). The last warpgroup pre-arrives once on warpgroup
  // 0's barrier, so every barrier ends balanced.
  const int my_turn = 1 + warpgroup;
  const int next_turn = 1 + (warpgroup + 1) % kWarpgroups;
  auto end_turn = [&](bool last_region) {
    if (kPersistent || !(warpgroup == kWarpgroups - 1 && last_region)) {
      named_bar_arrive(next_turn, 256);
    }
  };
  auto begin_turn = [&] {
    named_bar_sync(my_turn, 256);
  };

  if (num_tiles > 0) {
    if (!kPersistent && warpgroup == kWarpgroups - 1) named_bar_arrive(1, 256);  // 0 first
    mbar_wait(q_full(qb), (q_round >> 1) & 1);
    mbar_wait(k_full(ring % kStages), (ring / kStages) & 1);
    // (Each wgmma issue and its wait sit in one arm: ptxas serializes the wgmma otherwise.)
    begin_turn();
    if (my_tiles > 0) {
      issue_s(sk + (ring % kStages) * kTile);
      end_turn(false);
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      fence_operands(s);
      mbar_arrive(k_empty(ring % kStages));
      float correction[2];  // (O is still 0: nothing to rescale)
      softmax(0, correction);
      pack_p();
    } else {
      end_turn(false);
      mbar_arrive(k_empty(ring % kStages));
    }
  }
  for (int n = 1; n < num_tiles; ++n) {
    const int jk = ring + n, jv = ring + n - 1;  // positions in the walk's K / V rings
    const int ks = jk % kStages, vs = jv % kStages;
    mbar_wait(k_full(ks), (jk / kStages) & 1);
    mbar_wait(v_full(vs), (jv / kStages) & 1);
    if (n >= my_tiles) {  // past this warpgroup's tiles: at n == my_tiles its last P V
      begin_turn();
      if (n == my_tiles) {
        fence_operands(o);
        issue_pv(sv + vs * kTile);
        end_turn(false);
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        fence_operands(o);
      } else {
        end_turn(false);
      }
      mbar_arrive(k_empty(ks));
      mbar_arrive(v_empty(vs));
      continue;
    }
    begin_turn();
    fence_operands(o);
    issue_s(sk + ks * kTile);
    issue_pv(sv + vs * kTile);
    end_turn(false);
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");  // S_n done
    fence_operands(s);
    mbar_arrive(k_empty(ks));
    float correction[2];
    softmax(n, correction);
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");  // P_{n-1} V_{n-1} done
    fence_operands(o);
    mbar_arrive(v_empty(vs));
    rescale_o(correction);
    pack_p();
  }
  if (num_tiles > 0) {
    const int jv = ring + num_tiles - 1;
    const int vs = jv % kStages;
    mbar_wait(v_full(vs), (jv / kStages) & 1);
    begin_turn();
    if (my_tiles == num_tiles) {
      fence_operands(o);
      issue_pv(sv + vs * kTile);
      end_turn(true);
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      fence_operands(o);
    } else {
      end_turn(true);
    }
    // The last V buffer: a one-tile CTA never refills it, the walk's next tile does.
    if constexpr (kPersistent) mbar_arrive(v_empty(vs));
  }

  // ---- epilogue: out = O / l, lse = m * scale + log(l) ----
  // Else a warpgroup whose 64 rows are all the block's (all but a sequence's first block)
  // stages its output in its own rows of the Q tile (free since its last S; the other
  // warpgroups read only theirs), in the same 128-byte swizzle, and one thread stores it by
  // TMA (o_map: the output as [rows, num_heads x head_dim], 64 x 64 boxes); the warpgroup's
  // threads need not wait for the global writes, and the thread waits only until the tile is
  // read. Others store from registers.
  const bool staged =
      !kSplit && !sk_rest && o_by_tma && wg_rows == 64 && (!kPersistent || num_tiles > 0);
  // kSplit: the fp32 partials of rows [split][seq][row][head] for the combine kernel
  // (kernels/attention/attention_combine.cuh); a row that saw no key of the split (l = 0)
  // leaves O = 0 and lse = -inf, which weigh nothing there.
  T* out = static_cast<T*>(p.out);
  // kStreamK: each row's 1 / l and LSE before the store loop, for the pieces' hand-over (the
  // other walks compute them in the loop, as before v31: computed up front for every walk they
  // cost the d128 one-tile grid 1-3 %, NOTES.md v31 outcome).
  float epi_inv_l[2], epi_lse[2];
  if constexpr (kStreamK) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = quad_sum(row_sum[h]);
      epi_inv_l[h] = l > 0.f ? 1.f / l : 0.f;
      epi_lse[h] = l > 0.f ? row_max[h] * p.softmax_scale + logf(l) : kNegInf;
    }
    if (sk_rest || sk_first) {
      sk_normalise<kHeadDim>(o, epi_inv_l);  // O over this piece's keys (1 / l then 1)
      const int bar = 1 + kWarpgroups + warpgroup;
      if (sk_rest) {
        sk_publish<kHeadDim, kConsumers>(sk_slot<kHeadDim>(o_partial, blockIdx.x), o, epi_lse,
                                         bar, &sm90ws_sk_flags[blockIdx.x * 3 + warpgroup]);
      } else {
        // The tile's other pieces: the first pieces of the next CTAs whose ranges start
        // inside it (in the tail's units), unless clipped away (a shorter sequence).
        const int64_t tile_end = int64_t{l - stream_k.rounds * walk_grid + 1} * stream_k.units;
        for (int c2 = blockIdx.x + 1; c2 < walk_grid && stream_k.start(c2) < tile_end; ++c2) {
          const int64_t s2 = stream_k.start(c2);
          if (s2 >= stream_k.start(c2 + 1)) continue;  // a CTA without units
          if (s2 - (tile_end - stream_k.units) >= tile_key_tiles) continue;  // clipped: none
          sk_merge<kHeadDim, kConsumers>(o, epi_lse, sk_slot<kHeadDim>(o_partial, c2), bar,
                                         &sm90ws_sk_flags[c2 * 3 + warpgroup]);
        }
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (sk_rest) break;  // (kStreamK) its output is the merging CTA's
    const float l = kStreamK ? 0.f : quad_sum(row_sum[h]);
    const float inv_l = kStreamK ? epi_inv_l[h] : l > 0.f ? 1.f / l : 0.f;
    // (-inf for a row that saw no key: O stays 0.)
    auto row_lse = [&] {
      return kStreamK ? epi_lse[h] : l > 0.f ? row_max[h] * p.softmax_scale + logf(l) : kNegInf;
    };
    const int row = m_base + thread_row + h * 8;
    float v[kHeadDim / 8][2];
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) {
      v[j][0] = o[4 * j + 2 * h] * inv_l;
      v[j][1] = o[4 * j + 2 * h + 1] * inv_l;
    }
    if constexpr (kSplit) {
      if (row >= m_end) continue;
      const int64_t part =
          ((static_cast<int64_t>(split) * p.num_seqs + seq) * p.max_seqlen_q + row) * p.num_heads +
          head;
      float* dst = o_partial + part * kHeadDim + 2 * (lane & 3);
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j) {
        *reinterpret_cast<float2*>(dst + j * 8) = make_float2(v[j][0], v[j][1]);
      }
      if ((lane & 3) == 0) {
        lse_partial[part] = row_lse();
      }
    } else {
      prefill_round_q8_out<T>(p.round_q8_out, v);  // every lane, before the row test
      if (staged) {
        // Row r of the warpgroup, 8-column group j of panel j / 8: 16-byte chunk j % 8 of the
        // row's 128 bytes sits at chunk (j % 8) ^ (r % 8) (the swizzle; the quads of one store
        // then hit 8 distinct chunks: no bank conflict).
        const int r = warp * 16 + (lane >> 2) + h * 8;
        char* base = reinterpret_cast<char*>(sq_t + warpgroup * 64 * 64) + r * 128 + 4 * (lane & 3);
#pragma unroll
        for (int j = 0; j < kHeadDim / 8; ++j) {
          *reinterpret_cast<uint32_t*>(base + (j / 8) * kBlockM * 128 +
                                       (((j % 8) ^ (r % 8)) * 16)) = Traits::pack(v[j][0], v[j][1]);
        }
      }
      if (row >= m_end) continue;
      const int64_t token = q_start + row;
      if (!staged) {
        T* dst = out + (token * p.num_heads + head) * kHeadDim + 2 * (lane & 3);
#pragma unroll
        for (int j = 0; j < kHeadDim / 8; ++j) {
          *reinterpret_cast<uint32_t*>(dst + j * 8) = Traits::pack(v[j][0], v[j][1]);
        }
      }
      if (p.lse != nullptr && (lane & 3) == 0) {
        p.lse[token * p.num_heads + head] = row_lse();
      }
    }
  }
  if (staged) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the writes, to TMA
    named_bar_sync(1 + kWarpgroups + warpgroup, 128);                 // the warpgroup's 128
    if (threadIdx.x % 128 == 0) {
#pragma unroll
      for (int c = 0; c < kHeadDim / 64; ++c) {
        tma_store_2d(&o_map, head * kHeadDim + 64 * c, q_start + m_base + 64 * warpgroup,
                     smem_addr(sq_t + c * kBlockM * 64 + warpgroup * 64 * 64));
      }
      tma_store_wait_read();
    }
  }
  if constexpr (kPersistent) {
    // Q buffer qb is free once every consumer thread is past the tile (its last S long done)
    // and its TMA store has read the staged rows (the storing thread arrives after the read).
    if (num_tiles > 0) mbar_arrive(q_empty(qb));
  }
  ring += num_tiles;
  q_round += num_tiles > 0 ? 1 : 0;
  }  // walk
  if (kPersistent && warpgroup == 0) named_bar_sync(1, 256);  // the last hand-over
  }  // consumer warpgroups
#else
  __trap();  // only built for sm_90a; the launcher never selects it elsewhere
#endif
}

}  // namespace flashserve::kernels::device
