#pragma once
// The persistent walks of the Hopper prefill (kernels/attention/attention_prefill_sm90_ws.cuh):
// which CTA runs which tile, the device-wide state two of them keep between launches, and the
// stream-K walk's hand-over of a tile's pieces. Measurements: bench/attention/NOTES.md v25-v33.

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/attention_prefill_sm90_shape.cuh"
#include "kernels/cuda_plumbing.cuh"
#include "kernels/sm90_wgmma.cuh"

namespace flashserve::kernels::device {

// The grid's form (the kernel's kWalk). kOneTile: one CTA a tile. The persistent forms
// (kPersistent): gridDim.x CTAs (at most one an SM) walk the list of tiles (row block reversed
// fastest, then head, then sequence: the one-tile grid's order, the longest causal row block
// of a head first), each tile as the one-tile kernel runs it; the K/V rings and their phases
// run on across tiles, and two Q buffers let the producer load the next tile's Q and first K/V
// while the consumers finish the current one (NOTES.md v25, v26). They differ in which CTA
// runs which tile:
// - kStatic (v25): round k of the grid's G CTAs runs tiles [k G, (k + 1) G) of the list, the
//   set a one-tile grid runs as its wave k (so the L2 sees the same K/V at once), and CTA i
//   takes tile k G + (i + k) mod G of it (none past the list's end; the kernel's `walk_tile`).
//   With the row block fastest in the list, a plain stride (tile k G + i) would give CTA i the
//   same row block in every round whenever G is a multiple of the row blocks (132 CTAs, 4 of
//   them at s512): under the causal mask the CTAs of the longest blocks would take 4x the
//   others' time. The rotation walks each CTA through every row block (by steps of 1 + G mod
//   row_blocks a round). Each role of a CTA computes its walk itself.
// - kCounter (v26): each CTA's producer takes its next tile from a device-wide counter as it
//   gets to it (`sm90ws_tile_counter`), skipping those without rows, and hands it to the
//   consumers through a slot of its Q buffer (the kernel's tile_slot, id_full); -1 ends the
//   walk.
// - kStreamK (v31-v33): the static walk's whole rounds, then the tiles left over (fewer than a
//   round, which would leave the other SMs idle for a whole tile's time) cut into key-tile
//   pieces shared evenly by all the CTAs: CTA c takes units [c U / G, (c + 1) U / G) of the
//   U = tiles left x key tiles a tile (`Sm90StreamK`). A tile shared by several CTAs is
//   finished by the one holding its first keys (its range's last piece): the others (their
//   ranges' first pieces, run first) leave O normalised over their keys and the LSE in their
//   CTA's workspace slot and raise their flag (`sk_publish`); it merges them by the LSE
//   (`sk_merge`).
//   No wait can deadlock: a piece that publishes is its CTA's first item after the rounds, one
//   that merges its CTA's last, and a merger waits only on CTAs of higher index, all resident
//   (one CTA an SM). bench/attention/stream_k_model.py checks the partition and the hand-over
//   without a GPU (a ctest); change it with the walk.
// The launcher (attention_prefill.cu, hopper_persistent_walk) runs kStreamK where it runs
// (head_dim 128, non-causal, no window, more than 512 keys, given the workspace), else kStatic
// on calls of at most 512 keys and kCounter on longer ones (NOTES.md v30, v31-v33: each walk
// where it measured faster).
enum class Sm90Walk { kOneTile, kStatic, kCounter, kStreamK };

// kStreamK's workspace: one slot a CTA (at most kSm90SkMaxCtas CTAs), O (fp32, normalised over
// the piece's keys) in the consumers' fragment order, then each consumer thread's two rows'
// LSE. The flags, one a (CTA, consumer warpgroup), are raised by the piece's warpgroup once its
// slot is written and cleared by the merging warpgroup, so they are 0 between launches (one
// stream-K call at a time on a device, as the counter walk's).
constexpr int kSm90SkMaxCtas = 144;  // every sm_90 part has at most 132 SMs
constexpr int sm90ws_sk_slot_floats(int head_dim) {
  return sm90ws_consumer_threads(head_dim) * (head_dim / 2 + 2);
}
__device__ unsigned int sm90ws_sk_flags[kSm90SkMaxCtas * 3];

// The counter walk's tile counter (v26): each CTA's producer takes the next tile of the
// list with an atomicAdd, so the tiles go to the CTAs in list order as they free up (the
// hardware's order for a one-tile grid), and tiles without rows are skipped there. Every CTA
// ends with exactly one take past the list's end; the take that returns tiles + gridDim.x - 1
// is the launch's last, and its CTA sets the counter back to 0 for the next launch. So one
// persistent prefill runs at a time on a device: launches on one stream, as the runner's are
// (a concurrent one on another stream would take tiles of this one's list).
__device__ unsigned int sm90ws_tile_counter = 0;

// kStreamK's walk for one CTA: whole tiles for the first `rounds` rounds (the static walk's),
// then the pieces of its units [start(c), start(c + 1)) of the tiles left, `units` key tiles
// each (every tile's count at most: a shorter sequence's tile clips its pieces). Made with
// enabled false (the other walks) it holds constants the kernel never reads.
struct Sm90StreamK {
  int units, rounds, grid;
  int64_t total, end;  // the tail's units; the CTA's last unit + 1
  __device__ __forceinline__ Sm90StreamK(bool enabled, int tiles, int walk_grid, int key_tiles,
                                         int cta)
      : units(enabled ? key_tiles : 1), rounds(enabled ? tiles / walk_grid : 0), grid(walk_grid),
        total(enabled ? int64_t{tiles - rounds * walk_grid} * units : 0),
        end(enabled ? start(cta + 1) : 0) {}
  __device__ __forceinline__ int64_t start(int c) const { return total * c / grid; }
  // A piece's key tiles [kb0, kb1) of a tile whose own run from first_tile is num_tiles long
  // (a shorter sequence's: fewer than units): the part that exists, possibly none.
  __device__ __forceinline__ static void clip(int kb0, int kb1, int& first_tile, int& num_tiles) {
    const int a = min(kb0, num_tiles), b = min(kb1, num_tiles);
    first_tile += a;
    num_tiles = b - a;
  }
  // Item k of the walk: tile l, key tiles [kb0, kb1) of its units; u: the next tail unit
  // (the rounds' tiles from walk_tile(k)). False past the CTA's last unit.
  template <typename WalkTile>
  __device__ __forceinline__ bool item(int k, int64_t& u, int& l, int& kb0, int& kb1,
                                       WalkTile walk_tile) const {
    if (k < rounds) {
      l = walk_tile(k);
      kb0 = 0;
      kb1 = units;
      return true;
    }
    if (u >= end) return false;
    const int64_t t = u / units;
    kb0 = static_cast<int>(u - t * units);
    kb1 = static_cast<int>(min(int64_t{units}, kb0 + (end - u)));
    l = rounds * grid + static_cast<int>(t);
    u += kb1 - kb0;
    return true;
  }
};

// A consumer warpgroup's fragment of O (kHeadDim / 2 registers a thread: rows r and r + 8 of
// its quad, 2 columns of each 8) normalised over the piece's keys; 1 / l is 1 after it.
template <int kHeadDim>
__device__ __forceinline__ void sk_normalise(float (&o)[kHeadDim / 2], float (&inv_l)[2]) {
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    o[4 * j + 0] *= inv_l[0];
    o[4 * j + 1] *= inv_l[0];
    o[4 * j + 2] *= inv_l[1];
    o[4 * j + 3] *= inv_l[1];
  }
  inv_l[0] = inv_l[1] = 1.f;
}

// CTA c's slot of the stream-K workspace.
template <int kHeadDim>
__device__ __forceinline__ float* sk_slot(float* workspace, int c) {
  return workspace + static_cast<int64_t>(c) * sm90ws_sk_slot_floats(kHeadDim);
}

// A piece after its tile's first keys: the warpgroup's partial O (normalised) and LSE into its
// CTA's slot in each consumer thread's fragment order (the merging CTA's thread of the same
// index holds the same rows and columns), then, once all 128 threads' writes are visible
// device-wide, its flag (release; `bar`: the warpgroup's named barrier).
template <int kHeadDim, int kConsumers>
__device__ __forceinline__ void sk_publish(float* dst, const float (&o)[kHeadDim / 2],
                                           const float (&lse)[2], int bar, unsigned int* flag) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    reinterpret_cast<float4*>(dst)[j * kConsumers + tid] =
        make_float4(o[4 * j], o[4 * j + 1], o[4 * j + 2], o[4 * j + 3]);
  }
  reinterpret_cast<float2*>(dst + kConsumers * (kHeadDim / 2))[tid] = make_float2(lse[0], lse[1]);
  __threadfence();
  named_bar_sync(bar, 128);
  if (threadIdx.x % 128 == 0) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(flag), "r"(1u) : "memory");
  }
}

// The tile's first piece merging another's partial (published by sk_publish into `src`):
// wait for its flag (acquire, one thread; cleared again for the next launch), then O and the
// LSE of both by their LSE weights (-inf and -inf: O stays 0, LSE -inf).
template <int kHeadDim, int kConsumers>
__device__ __forceinline__ void sk_merge(float (&o)[kHeadDim / 2], float (&lse)[2],
                                         const float* src, int bar, unsigned int* flag) {
  const int tid = threadIdx.x;
  if (threadIdx.x % 128 == 0) {
    unsigned int f = 0;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(f) : "l"(flag) : "memory");
      if (f != 0) break;
      __nanosleep(100);
    }
    *flag = 0;  // consumed: 0 again for the next launch
  }
  named_bar_sync(bar, 128);
  const float2 lse2 =
      __ldcg(reinterpret_cast<const float2*>(src + kConsumers * (kHeadDim / 2)) + tid);
  const float lse_b[2] = {lse2.x, lse2.y};
  float wa[2], wb[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mx = fmaxf(lse[h], lse_b[h]);
    wa[h] = mx == kNegInf ? 0.f : __expf(lse[h] - mx);
    wb[h] = mx == kNegInf ? 0.f : __expf(lse_b[h] - mx);
    const float sum = wa[h] + wb[h];
    lse[h] = mx == kNegInf ? kNegInf : mx + logf(sum);
    wa[h] = sum > 0.f ? wa[h] / sum : 0.f;
    wb[h] = sum > 0.f ? wb[h] / sum : 0.f;
  }
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    const float4 b = __ldcg(reinterpret_cast<const float4*>(src) + j * kConsumers + tid);
    o[4 * j + 0] = o[4 * j + 0] * wa[0] + b.x * wb[0];
    o[4 * j + 1] = o[4 * j + 1] * wa[0] + b.y * wb[0];
    o[4 * j + 2] = o[4 * j + 2] * wa[1] + b.z * wb[1];
    o[4 * j + 3] = o[4 * j + 3] * wa[1] + b.w * wb[1];
  }
}

}  // namespace flashserve::kernels::device
