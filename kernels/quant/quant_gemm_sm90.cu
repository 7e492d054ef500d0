// quant_gemm() with QuantGemmKernel::kWgmmaWs (kernels/quant/quant_gemm.h): Hopper's
// warpgroup MMA with the weights as the register A operand, warp-specialized (the kernel's
// structure is described above quant_gemm_wgmma_ws_kernel below; what was measured on the
// way, in bench/gemm/NOTES.md).
//
// Tiling. A CTA computes kRows = 128 weight rows by kBM tokens (64, 128 or 256) over a range
// of k (all of it, or one of `splits` parts), in stages of kBK = 64 elements (2 units of
// 32), with the mma.sync kernel's (kernels/quant/quant_gemm.cu) scale staging, weight copies
// and decoding (quant_gemm_common.cuh).
//   * A consumer warpgroup's rows are one m64 tile; warp q holds rows 16 q .. 16 q + 15. Per
//     warp, the A operand of wgmma m64nNk16 from registers has the layout of mma.sync
//     m16n8k16's A fragment (PTX ISA, "Register fragments" of wgmma), so decode_fragment()
//     produces it unchanged.
//   * The tokens are the wgmma N dimension: one wgmma m64n{kBM}k16 per k16 step. B is the x
//     tile [kBM][64] bf16, K-major, in the 128-byte swizzle, first in each stage buffer
//     (1024-byte aligned), written by TMA.
//   * wgmma runs asynchronously: step s is issued (fence, wgmma, commit), then wait_group 2
//     lets steps s - 1 and s run while the next step's A fragments are decoded; step s - 2
//     has completed by then, so its A registers are free again (each of a stage's four
//     unrolled steps has registers of its own).
// Split-k and its reduction as in the mma.sync kernel.
#include <cuda.h>  // CUtensorMap (kernels/tensor_map.h encodes them)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/device.h"
#include "kernels/quant/quant_gemm_common.cuh"
#include "kernels/setmaxnreg.h"
#include "kernels/sm90_wgmma.cuh"
#include "kernels/tensor_map.h"

namespace flashserve::kernels {
namespace device::quant_gemm {
namespace {

constexpr int kSmemPerSm = 228 * 1024;
constexpr int kReservedPerCta = 1024;  // the runtime's share of an SM's shared memory
constexpr int kAlign = 1024;           // the 128-byte swizzle repeats every 1024 bytes

// Weight rows of a CTA (one producer thread a row, as StageCopier and the scale staging
// want): two m64 tiles, one a consumer warpgroup.
constexpr int kRows = 128;

// A stage buffer, every part written by TMA but the scales, each part 1024-byte aligned:
//   * the x tile ([kBM][kBK] bf16 = kBM rows of 128 bytes, 128-byte swizzle);
//   * the quant bytes: per half (Q8_0 two, its units' first and second 16 bytes; others one)
//     [kRows][32 bytes], a row's two units, in the 32-byte swizzle (a row's two 16-byte
//     chunks swapped in rows 4-7 of every 8: the 8 rows a warp's lanes g read then fall in
//     8 different bank groups);
//   * Q5_K / Q6_K: the high bits [kRows][16 bytes] (Q5_K uses the first 8);
//   * the decoded scales [kRows][16 bytes], stored by the producer threads (store_scales).
// Rounded up to a multiple of 1024 bytes so that every stage's x tile stays aligned.
template <int kBM>
__host__ __device__ constexpr int x_tile_bytes() { return kBM * kBK * 2; }
template <WeightFormat F>
__host__ __device__ constexpr int qs_halves() { return F == WeightFormat::kQ8_0 ? 2 : 1; }
constexpr int kQsBlockBytes = kRows * 32;  // one half
constexpr int kRowBlockBytes = kRows * 16;  // the high bits, the scales
template <WeightFormat F>
__host__ __device__ constexpr bool has_qh() { return qh_bytes<F>() > 0; }
template <int kBM>
__host__ __device__ constexpr int qs_at() { return x_tile_bytes<kBM>(); }
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int qh_at() { return qs_at<kBM>() + qs_halves<F>() * kQsBlockBytes; }
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int scales_at() { return qh_at<F, kBM>() + (has_qh<F>() ? kRowBlockBytes : 0); }
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int wg_stage_bytes() {
  return (scales_at<F, kBM>() + kRowBlockBytes + kAlign - 1) / kAlign * kAlign;
}
// The bytes TMA completes on a stage's full barrier: everything before the scales.
template <WeightFormat F, int kBM>
__host__ __device__ constexpr uint32_t tma_stage_bytes() { return scales_at<F, kBM>(); }

// The k splits for CTAs of `rows` rows and bm tokens, c of them an SM, on num_sms SMs: the
// count that minimises a model of the time in stage times: rounds of CTAs x (a split's
// stages + ~2 for the ramp and the epilogue), plus the reduction's fp32 traffic (~1.8 MB a
// stage time). Unlike the mma.sync kernel's "fill every SM" this sees that 48 tiles in 3
// splits on 132 SMs take two rounds. Each split keeps >= 4 stages; the partial sums fit
// p.partials; none is empty (nonempty_splits).
int wgmma_splits(const QuantGemmParams& p, int rows, int bm, int c, int num_sms) {
  const int64_t tiles = int64_t{(p.n + rows - 1) / rows} * ((p.m + bm - 1) / bm);
  const int64_t slots = int64_t{c} * num_sms;
  const int stages = (p.k / kQuantUnit + kUnitsPerStage - 1) / kUnitsPerStage;
  int best = 1;
  double best_cost = 0;
  for (int s = 1; s <= std::max(1, stages / 4); ++s) {
    if (s > 1 && int64_t{s} * p.m * p.n > p.partials_floats) break;
    const int64_t rounds = (tiles * s + slots - 1) / slots;
    double cost = static_cast<double>(rounds) * ((stages + s - 1) / s + 2) * rows / 256.0 * c;
    if (s > 1) cost += (4.0 * s + 2.0) * p.m * p.n / 1.8e6;
    if (s == 1 || cost < best_cost) best = s, best_cost = cost;
  }
  return nonempty_splits(stages, best);
}


// ---------------------------------------------------------------------------------------
// The kernel (QuantGemmKernel::kWgmmaWs), warp-specialized. A CTA of 384 threads:
//   * warpgroup 0 (threads 0-127, one a weight row, so StageCopier and the scale staging
//     serve unchanged) is the producer: it fills a ring of kStages stages and never computes;
//   * warpgroups 1 and 2 are the consumers: consumer c owns the m64 tile of rows 64 c .. +63
//     (warp q of it rows 16 q + g, + 8), one wgmma m64n{kBM}k16 a k16 step, and
//     both read every stage's x tile (the B operand). Taking alternate m64 tiles rather than
//     alternate stages keeps a consumer's accumulators at kBM / 2 registers and needs no
//     reduction of two warpgroups' sums at the end.
//   * Each stage has a "full" mbarrier and an "empty" one (the 256 consumer threads arrive).
//     No CTA-wide barrier after the barriers' init.
//   * Producer, stage i: waits until stage i - kStages is empty; thread 0 adds the stage's
//     TMA bytes to full(i)'s transaction count and issues its copies, which complete them on
//     full(i): the x tile (a tensor map of x built by the launcher: 128-byte swizzle, tokens
//     past m and columns past k zero-filled) and the 128 weight rows' quant bytes and high
//     bits (maps of the repacked arrays as byte matrices: WeightMaps); every thread stores
//     its row's scales of the stage decoded (loaded kScaleAhead stages earlier into
//     registers), arrives on full(i) (releasing those stores), and loads the scales of stage
//     i + kScaleAhead. So full(i) completes when the copies of stage i land, whatever the
//     later stages do: the producer runs up to kStages stages ahead of the consumers. Why
//     the weights by TMA and not a cp.async a thread and 16 bytes: a warp's copies touched a
//     row each, ~24 shared-memory wavefronts where 4 would do, on the L1 pipe beside the
//     wgmmas' reads of x (ncu); by TMA the Q6_K GEMMs ran 6-10 % faster at 256 tokens and
//     Q4_K's the same (bench/gemm/NOTES.md, twenty-sixth session). Why not let each
//     producer thread wait for its own copies: the producer's chain of dependent
//     instructions then sets every stage's time and the consumers wait on it (measured with
//     ncu's per-instruction stall samples: bench/gemm/NOTES.md).
//   * Consumer, stage i: waits on full(i), then per k16 step decodes its A fragment
//     (decode_fragment), issues the wgmma, commits and waits until two groups are in flight
//     (wait_group 2). After stage i's second step that wait has retired every wgmma of stage
//     i - 1, the last readers of its slot, so the thread arrives on empty(i - 1) there (the
//     completion of a wgmma implies a generic-async proxy fence, so the TMA that refills the
//     slot is ordered after those reads).
// CTAs an SM: two at 64 tokens (a consumer holds 32 accumulators; ptxas -v: 70-80
// registers, and two CTAs allow 80), one at 128 (64 accumulators, ~102), without setmaxnreg.
// At 256 tokens (one wgmma m64n256k16 a k16 step, 128 accumulators a consumer thread) one
// CTA, which starts at 168 registers a thread (384 threads) and moves them with setmaxnreg:
// the producer down to 88, the consumers up to 208 (128 x (88 + 2 x 208) = 64,512 = 384 x 168,
// the whole pool the CTA is launched with: kernels/setmaxnreg.h).
// Why 256-token tiles: a CTA-stage's cost grows much less than its width, so a stage that
// multiplies each decoded weight fragment by 256 tokens instead of 128 halves the stages of a
// 256-token step and the decoding of every weight (measured: bench/gemm/NOTES.md).
constexpr int kWsThreads = 3 * kRows;
constexpr int kWsMaxStages = 10;
template <int kBM>
__host__ __device__ constexpr int ws_ctas_per_sm() { return kBM == 64 ? 2 : 1; }
template <int kBM>
__host__ __device__ constexpr bool ws_moves_registers() { return kBM == 256; }
constexpr int kWsProducerRegs = 88, kWsConsumerRegs = 208;
static_assert(setmaxnreg_budgets_fit(kWsProducerRegs, 2, kWsConsumerRegs),
              "setmaxnreg budgets exceed the registers the CTA is launched with");

template <WeightFormat F, int kBM>
__host__ __device__ constexpr int ws_stages() {
  const int fit = (kSmemPerSm / ws_ctas_per_sm<kBM>() - kReservedPerCta - kAlign -
                   8 * 2 * kWsMaxStages) /
                  wg_stage_bytes<F, kBM>();
  return fit < kWsMaxStages ? fit : kWsMaxStages;
}
// The ring, its 8-byte mbarriers (full then empty, a stage each), the alignment slack.
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int ws_smem_bytes() {
  return ws_stages<F, kBM>() * wg_stage_bytes<F, kBM>() + 16 * ws_stages<F, kBM>() + kAlign;
}

// The weights' TMA maps (launch_wgmma_ws): the quant bytes and the high bits as byte
// matrices [n][row bytes], boxes of 32 (quants, 32-byte swizzle) or 16 bytes (high bits) by
// kRows rows, rows past n and bytes past a row's end zero-filled. (Units past the row's end
// have zero scales, load_scales, so what their quants read does not matter.) A box's first
// byte must lie on a 16-byte boundary of its row (the encoder cannot check coordinates; an
// unaligned one is an illegal instruction at run time), hence Q5_K's high bits below.
struct WeightMaps {
  CUtensorMap qs, qh;
};

// The device side, compiled for sm_90a only (elsewhere the kernel is empty).
#if defined(FLASHSERVE_SM90A)
// Stages whose scales a producer thread holds in registers ahead of their store.
constexpr int kScaleAhead = 3;
// mbarriers: kernels/sm90_wgmma.cuh (mbar_init / mbar_arrive / mbar_wait).

// The ring's geometry and barriers, the same for both roles.
template <WeightFormat F, int kBM>
struct WsRing {
  static constexpr int kStages = ws_stages<F, kBM>();
  static constexpr int kStageBytes = wg_stage_bytes<F, kBM>();
  uint8_t* base;
  uint32_t bars;  // full(s) at bars + 8 s, empty(s) at bars + 8 (kStages + s)
  // Of slot s (stage i uses slot i % kStages, in round i / kStages).
  __device__ __forceinline__ uint8_t* slot(int s) const { return base + s * kStageBytes; }
  __device__ __forceinline__ uint32_t full(int s) const { return bars + 8 * s; }
  __device__ __forceinline__ uint32_t empty(int s) const { return bars + 8 * (kStages + s); }
};

// A stage's slot and the parity of its round, stepped one stage at a time (no divisions by
// kStages, which is not a power of two).
template <int kStages>
struct RingPos {
  int slot = 0;
  uint32_t parity = 0;
  __device__ __forceinline__ void next() {
    if (++slot == kStages) slot = 0, parity ^= 1;
  }
};

// The producer warpgroup: stages [0, num_stages) of the split starting at s_begin.
// It alone calls wait_for_prior_grid() late: the weights are written by no kernel of a step
// (the PDL contract, kernels/dependent_launch.cuh), so the first ring round's weight copies
// and the first kScaleAhead stages' scales are issued while the previous kernel still runs
// (this CTA is resident once an SM has drained), and only x waits for it.
template <WeightFormat F, int kBM>
__device__ __forceinline__ void ws_produce(const QuantGemmParams& p, const WsRing<F, kBM>& r,
                                           const CUtensorMap& x_map, const WeightMaps& w_maps,
                                           int row0, int tok0, int s_begin, int num_stages) {
  constexpr int kStages = WsRing<F, kBM>::kStages;
  static_assert(kStages >= 2);
  const int num_units = p.k / kQuantUnit;
  const QuantLayout l = quant_layout(F, p.n, p.k);
  const RowPtrs rp = row_ptrs<F>(static_cast<const uint8_t*>(p.w), l,
                                 min(row0 + static_cast<int>(threadIdx.x), p.n - 1));
  // Thread 0: stage i's weight rows (quant bytes, high bits) into slot `buf`, on `full`.
  auto copy_weights = [&](uint8_t* buf, uint32_t full, int i) {
    const int u = (s_begin + i) * kUnitsPerStage;
#pragma unroll
    for (int h = 0; h < qs_halves<F>(); ++h) {
      tma_load_2d(smem_addr(buf + qs_at<kBM>() + h * kQsBlockBytes), &w_maps.qs,
                  16 * u + h * (p.k / 2), row0, full);
    }
    if constexpr (has_qh<F>()) {  // from a 16-byte boundary: Q5_K's 8 bytes may be the second half
      tma_load_2d(smem_addr(buf + qh_at<F, kBM>()), &w_maps.qh,
                  qh_bytes<F>() * (s_begin + i) / 16 * 16, row0, full);
    }
  };
  ScaleWords sc[kScaleAhead];  // sc[j]: the scales of the next stage i with i % kScaleAhead == j
#pragma unroll
  for (int j = 0; j < kScaleAhead; ++j) {
    if (j < num_stages) load_scales<F>(rp, (s_begin + j) * kUnitsPerStage, num_units, sc[j]);
  }
  // The first round's weights: its slots are empty (stage i < kStages is slot i), and each
  // full barrier expects the stage's x and weight bytes at once, so no phase can complete
  // before x lands.
  const int first_round = min(kStages, num_stages);
  if (threadIdx.x == 0) {
    for (int i = 0; i < first_round; ++i) {
      mbar_expect_tx(r.full(i), tma_stage_bytes<F, kBM>());
      copy_weights(r.slot(i), r.full(i), i);
    }
  }
  wait_for_prior_grid();  // x is the previous kernel's
  RingPos<kStages> at;
  // kScaleAhead stages an iteration, so that the indices of sc[] are constants.
  for (int i0 = 0; i0 < num_stages; i0 += kScaleAhead) {
#pragma unroll
    for (int j = 0; j < kScaleAhead; ++j) {
      const int i = i0 + j;
      if (i >= num_stages) break;
      // Round k of a slot waits for the consumers' release of round k - 1 (parity ^ 1).
      if (i >= kStages) mbar_wait(r.empty(at.slot), at.parity ^ 1);
      uint8_t* buf = r.slot(at.slot);
      const uint32_t full = r.full(at.slot);
      if (threadIdx.x == 0) {
        if (i >= first_round) {
          mbar_expect_tx(full, tma_stage_bytes<F, kBM>());
          copy_weights(buf, full, i);
        }
        tma_load_2d(smem_addr(buf), &x_map, (s_begin + i) * kBK, tok0, full);
      }
      store_scales<F>(sc[j], (s_begin + i) * kUnitsPerStage,
                      buf + scales_at<F, kBM>() + 16 * threadIdx.x);
      mbar_arrive(full);
      if (i + kScaleAhead < num_stages) {
        load_scales<F>(rp, (s_begin + i + kScaleAhead) * kUnitsPerStage, num_units, sc[j]);
      }
      at.next();
    }
  }
  // No drain: each TMA copy signals its stage's full barrier, which the consumers wait on
  // before the CTA can end.
}

// A consumer warpgroup: the m64 tile of rows 64 c .. + 63 over the split's stages, into acc.
template <WeightFormat F, int kBM>
__device__ __forceinline__ void ws_consume(const WsRing<F, kBM>& r, int my_row, int s_begin,
                                           int num_stages,
                                           float (&acc)[kBM / 2]) {
  const int t = threadIdx.x % 4;
  const uint32_t k43 = bf16_magic();
  RingPos<WsRing<F, kBM>::kStages> at, prev;  // of stages i and i - 1 (once i >= 1)
#pragma unroll 1
  for (int i = 0; i < num_stages; ++i) {
    mbar_wait(r.full(at.slot), at.parity);
    const uint8_t* buf = r.slot(at.slot);
    const uint8_t* qs0 = buf + qs_at<kBM>() + 32 * my_row;
    const uint8_t* qh0 = buf + qh_at<F, kBM>() + 16 * my_row + qh_bytes<F>() * (s_begin + i) % 16;
    const uint8_t* sc0 = buf + scales_at<F, kBM>() + 16 * my_row;
#pragma unroll
    for (int j = 0; j < kUnitsPerStage; ++j) {
      // Unit j's 16 bytes, where the 32-byte swizzle put them (rows my_row and my_row + 8
      // alike).
      const int chunk = 16 * (j ^ (my_row >> 2 & 1));
      const RowUnit<F> lo =
          load_row_unit_parts<F>(qs0 + chunk, kQsBlockBytes, qh0, sc0, j, t);
      const RowUnit<F> hi = load_row_unit_parts<F>(qs0 + 8 * 32 + chunk, kQsBlockBytes,
                                                   qh0 + 8 * 16, sc0 + 8 * 16, j, t);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t a[4];
        decode_fragment<F>(lo, hi, h, t, k43, a);
        // k16 step 2 j + h: 32 bytes into the x tile's 128-byte rows.
        const uint64_t desc = sw128_desc(buf + 32 * (2 * j + h), 16, 1024);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        // The split's first step writes the accumulators (D = A B), every later one adds.
        wgmma_rs<__nv_bfloat16, kBM>(acc, a, desc, i | j | h);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 2;\n" ::: "memory");
        // Two steps of stage i may still run; every wgmma of stage i - 1 has retired: its
        // slot may be refilled.
        if (j == 0 && h == 1 && i > 0) mbar_arrive(r.empty(prev.slot));
      }
    }
    if (i > 0) prev.next();
    at.next();
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  fence_operands(acc);
}
#endif  // FLASHSERVE_SM90A

template <typename T, bool kAdd>
__device__ __forceinline__ void ws_put(T* at, float v) {
  if constexpr (kAdd) {
    *at += v;
  } else if constexpr (sizeof(T) == 2) {
    *at = __float2bfloat16_rn(v);
  } else {
    *at = v;
  }
}
template <typename T, bool kAdd, int kAcc>
__device__ __forceinline__ void ws_store_tile(T* y, int64_t ld, int f0, int tok, int m, int n,
                                              bool full, const float (&acc)[kAcc]) {
  T* row = y + int64_t{tok} * ld + f0;
  if (full) {
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j, row += 8 * ld) {
      ws_put<T, kAdd>(row, acc[4 * j]);
      ws_put<T, kAdd>(row + ld, acc[4 * j + 1]);
      ws_put<T, kAdd>(row + 8, acc[4 * j + 2]);
      ws_put<T, kAdd>(row + ld + 8, acc[4 * j + 3]);
    }
    return;
  }
  const bool f_lo = f0 < n, f_hi = f0 + 8 < n;
#pragma unroll
  for (int j = 0; j < kAcc / 4; ++j, row += 8 * ld) {
    const int t0 = tok + 8 * j;
    if (t0 < m) {
      if (f_lo) ws_put<T, kAdd>(row, acc[4 * j]);
      if (f_hi) ws_put<T, kAdd>(row + 8, acc[4 * j + 2]);
    }
    if (t0 + 1 < m) {
      if (f_lo) ws_put<T, kAdd>(row + ld, acc[4 * j + 1]);
      if (f_hi) ws_put<T, kAdd>(row + ld + 8, acc[4 * j + 3]);
    }
  }
}

template <WeightFormat F, int kBM>
__global__ void __launch_bounds__(kWsThreads, ws_ctas_per_sm<kBM>())
    quant_gemm_wgmma_ws_kernel(const QuantGemmParams p, const int splits,
                               const __grid_constant__ CUtensorMap x_map,
                               const __grid_constant__ WeightMaps w_maps) {
#if defined(FLASHSERVE_SM90A)
  using Ring = WsRing<F, kBM>;
  extern __shared__ uint4 smem_raw[];
  Ring r;
  r.base = reinterpret_cast<uint8_t*>(smem_raw) +
           ((kAlign - (smem_addr(smem_raw) & (kAlign - 1))) & (kAlign - 1));
  r.bars = smem_addr(r.base + Ring::kStages * Ring::kStageBytes);
  if (threadIdx.x == 0) {
    for (int s = 0; s < Ring::kStages; ++s) {
      mbar_init(r.full(s), kRows);  // a producer thread's arrival (its scales), and TMA's bytes
      mbar_init(r.empty(s), 2 * kRows);
    }
  }
  __syncthreads();  // the barriers' init; the only CTA-wide barrier

  const int tok0 = blockIdx.x * kBM, row0 = blockIdx.y * kRows, split = blockIdx.z;
  const int total_stages = (p.k / kQuantUnit + kUnitsPerStage - 1) / kUnitsPerStage;
  const int per_split = (total_stages + splits - 1) / splits;
  const int s_begin = split * per_split, s_end = min(total_stages, s_begin + per_split);
  const int num_stages = max(s_end - s_begin, 0);
  if (threadIdx.x < kRows) {
    if constexpr (ws_moves_registers<kBM>()) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kWsProducerRegs));
    }
    ws_produce<F, kBM>(p, r, x_map, w_maps, row0, tok0, s_begin, num_stages);
    allow_next_grid();
    return;
  }
  if constexpr (ws_moves_registers<kBM>()) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kWsConsumerRegs));
  }
  wait_for_prior_grid();  // the consumers write y (or read it: +=) and the partial sums
  const int c = threadIdx.x / kRows - 1, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int my_row = 64 * c + 16 * warp + g;  // and + 8
  constexpr int kAcc = kBM / 2;
  float acc[kAcc];  // set by the first wgmma (every split has >= 1 stage: nonempty_splits)
  ws_consume<F, kBM>(r, my_row, s_begin, num_stages, acc);
  allow_next_grid();

  const int f0 = row0 + my_row, tok = tok0 + 2 * t;
  const bool full = row0 + kRows <= p.n && tok0 + kBM <= p.m;
  if (splits > 1) {
    ws_store_tile<float, false>(p.partials + int64_t{split} * p.m * p.n, p.n, f0, tok, p.m,
                                p.n, full, acc);
  } else if (p.output == GemvOutput::kBf16) {
    ws_store_tile<__nv_bfloat16, false>(static_cast<__nv_bfloat16*>(p.y), p.ldy, f0, tok, p.m,
                                        p.n, full, acc);
  } else if (p.output == GemvOutput::kFp32) {
    ws_store_tile<float, false>(static_cast<float*>(p.y), p.ldy, f0, tok, p.m, p.n, full, acc);
  } else {
    ws_store_tile<float, true>(static_cast<float*>(p.y), p.ldy, f0, tok, p.m, p.n, full, acc);
  }
#endif
}

template <WeightFormat F, int kBM>
struct WsSmemTag {};

// A TMA map of bytes [rows][row_bytes] at `base` (16-byte aligned, row_bytes a multiple of
// 16): boxes of box_bytes x kRows rows, zeros past the bounds.
absl::Status byte_tensor_map(const void* base, int64_t rows, int64_t row_bytes, int box_bytes,
                             CUtensorMapSwizzle swizzle, CUtensorMap* map) {
  TensorMap2d t;
  t.base = base;
  t.type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  t.rows = static_cast<uint64_t>(rows);
  t.cols = t.row_bytes = static_cast<uint64_t>(row_bytes);
  t.box_rows = kRows;
  t.box_cols = static_cast<uint32_t>(box_bytes);
  t.swizzle = swizzle;
  return encode_tensor_map_2d(t, "quant_gemm: weight bytes", map);
}

// The weights' maps (WeightMaps): the quant bytes in boxes of a stage's 32 bytes a row (Q8_0:
// of each half), the high bits in boxes of 16.
template <WeightFormat F>
absl::Status weight_maps(const QuantGemmParams& p, WeightMaps* maps) {
  const QuantLayout l = quant_layout(F, p.n, p.k);
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  if (absl::Status s = byte_tensor_map(w + l.qs_offset, p.n, l.qs_row_bytes, 32,
                                       CU_TENSOR_MAP_SWIZZLE_32B, &maps->qs);
      !s.ok()) {
    return s;
  }
  if constexpr (has_qh<F>()) {
    return byte_tensor_map(w + l.qh_offset, p.n, l.qh_row_bytes, 16, CU_TENSOR_MAP_SWIZZLE_NONE,
                           &maps->qh);
  }
  maps->qh = maps->qs;  // unused: the format has no high bits
  return absl::OkStatus();
}

// The TMA map of x [m, k] bf16 for the producer: boxes of kBK columns x bm tokens in the
// 128-byte swizzle the consumers' wgmma descriptors read (sw128_desc), zeros past m and k.
absl::Status x_tensor_map(const QuantGemmParams& p, int bm, CUtensorMap* map) {
  TensorMap2d t;
  t.base = p.x;
  t.type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  t.rows = static_cast<uint64_t>(p.m);
  t.cols = static_cast<uint64_t>(p.k);
  t.row_bytes = static_cast<uint64_t>(p.k) * 2;
  t.box_rows = static_cast<uint32_t>(bm);
  t.box_cols = kBK;
  t.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  return encode_tensor_map_2d(t, "quant_gemm: x", map);
}

// 64-, 128- or 256-token tiles (quant_gemm_wgmma_ws below), k split by wgmma_splits().
template <WeightFormat F, int kBM>
absl::Status launch_wgmma_ws(const QuantGemmParams& p, int num_sms, cudaStream_t stream,
                             int* splits_out) {
  auto* kernel = quant_gemm_wgmma_ws_kernel<F, kBM>;
  constexpr int smem = ws_smem_bytes<F, kBM>();
  static_assert(ws_ctas_per_sm<kBM>() * (smem + kReservedPerCta) <= kSmemPerSm);
  if (absl::Status s = set_smem_limit_once<WsSmemTag<F, kBM>>(kernel, smem); !s.ok()) return s;
  const int splits = wgmma_splits(p, kRows, kBM, ws_ctas_per_sm<kBM>(), num_sms);
  const dim3 grid(static_cast<unsigned>((p.m + kBM - 1) / kBM),
                  static_cast<unsigned>((p.n + kRows - 1) / kRows), splits);
  CUtensorMap x_map;
  if (absl::Status s = x_tensor_map(p, kBM, &x_map); !s.ok()) return s;
  WeightMaps w_maps;
  if (absl::Status s = weight_maps<F>(p, &w_maps); !s.ok()) return s;
  CUDA_CHECK(launch_dependent(kernel, grid, kWsThreads, smem, stream, p, splits, x_map, w_maps));
  *splits_out = splits;
  return reduce_splits(p, splits, stream);
}

}  // namespace

absl::Status quant_gemm_wgmma_ws(const QuantGemmParams& p, int num_sms, cudaStream_t stream,
                                int* splits_out) {
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    constexpr WeightFormat F = decltype(tag)::value;
    const int tile = p.token_tile != 0 ? p.token_tile : p.m > 128 ? 256 : p.m > 64 ? 128 : 64;
    if (tile == 256) return launch_wgmma_ws<F, 256>(p, num_sms, stream, splits_out);
    if (tile == 128) return launch_wgmma_ws<F, 128>(p, num_sms, stream, splits_out);
    return launch_wgmma_ws<F, 64>(p, num_sms, stream, splits_out);
  });
}

}  // namespace device::quant_gemm

bool quant_gemm_wgmma_supported() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return compute_capability(device) == 90;
}

}  // namespace flashserve::kernels
