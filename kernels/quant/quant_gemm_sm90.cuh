#pragma once
// What the Hopper kernels on quantized weights (kernels/quant/quant_gemm_sm90.cu: wgmma with
// the weights as the register A operand, plain and warp-specialized;
// kernels/quant/quant_gemm_sm90_ss.cu: the weights decoded once a CTA into a shared-memory
// tile) share: the CTA's 128 weight rows, the ring stage (x tile, then the weight rows), the
// k-split model and the producer warpgroup of the warp-specialized kernels. Device code
// only, included by those two files.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/quant/quant_gemm_common.cuh"
#include "kernels/sm90_wgmma.cuh"

namespace flashserve::kernels {
namespace device::quant_gemm {
// Each including .cu file gets its own copy.
namespace {  // NOLINT(build/namespaces)

constexpr int kSmemPerSm = 228 * 1024;
constexpr int kReservedPerCta = 1024;  // the runtime's share of an SM's shared memory
constexpr int kAlign = 1024;           // the 128-byte swizzle repeats every 1024 bytes

// Threads and weight rows of a CTA (one thread a row, as StageCopier and the scale staging
// want): one warpgroup, two m64 tiles.
constexpr int kRows = 128;

// A stage buffer: the x tile ([kBM][kBK] bf16 = kBM rows of 128 bytes), then the weight rows,
// rounded up to a multiple of 1024 bytes so that every stage's x tile stays aligned.
template <int kBM>
__host__ __device__ constexpr int x_tile_bytes() { return kBM * kBK * 2; }
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int wg_stage_bytes() {
  return (x_tile_bytes<kBM>() + kRows * row_stride<F>() + kAlign - 1) / kAlign * kAlign;
}

// The k splits for CTAs of `rows` rows and bm tokens, c of them an SM, on num_sms SMs: the
// count that minimises a model of the time in stage times: rounds of CTAs x (a split's
// stages + ~2 for the ramp and the epilogue), plus the reduction's fp32 traffic (~1.8 MB a
// stage time). Unlike the mma.sync kernel's "fill every SM" this sees that 48 tiles in 3
// splits on 132 SMs take two rounds. Each split keeps >= 4 stages; the partial sums fit
// p.partials.
inline int wgmma_splits(const QuantGemmParams& p, int rows, int bm, int c, int num_sms) {
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
  return best;
}

constexpr int kWsLag = 4;  // stages whose copies stay in flight behind the newest one

// The device side, compiled for sm_90a only.
#if defined(FLASHSERVE_SM90A)
// mbarriers: kernels/sm90_wgmma.cuh (mbar_init / mbar_arrive / mbar_wait).

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

// The producer warpgroup (threads 0-127, one a weight row): stages [0, num_stages) of the
// split starting at s_begin into the ring r (Ring: kStages, kWAt, slot(s), full(s), empty(s),
// the full barriers counting kRows arrivals).
template <WeightFormat F, int kBM, class Ring>
__device__ __forceinline__ void ws_produce(const QuantGemmParams& p, const Ring& r, int row0,
                                           int tok0, int s_begin, int num_stages) {
  constexpr int kStages = Ring::kStages;
  static_assert(kWsLag >= 1 && kWsLag <= kStages - 2, "the ring deadlocks (see above)");
  const int num_units = p.k / kQuantUnit;
  const QuantLayout l = quant_layout(F, p.n, p.k);
  const RowPtrs rp = row_ptrs<F>(static_cast<const uint8_t*>(p.w), l,
                                 min(row0 + static_cast<int>(threadIdx.x), p.n - 1));
  const StageCopier<F, kBM, Ring::kWAt, 0, kRows> copier(p, l, row0, tok0);
  ScaleWords sc[kWsLag];  // sc[j]: the scales of the newest stage i with i % kWsLag == j
  RingPos<kStages> at, at_done;  // of stages i and done = i - kWsLag (once done >= 0)
  // Iteration i issues stage i and completes stage i - kWsLag; kWsLag at a time so that the
  // indices of sc[] are constants.
  for (int i0 = 0; i0 < num_stages + kWsLag; i0 += kWsLag) {
#pragma unroll
    for (int j = 0; j < kWsLag; ++j) {
      const int i = i0 + j, done = i - kWsLag;
      if (i < num_stages) {
        // Round k of a slot waits for the consumers' release of round k - 1 (parity ^ 1).
        if (i >= kStages) mbar_wait(r.empty(at.slot), at.parity ^ 1);
        copier.issue(p, s_begin + i, num_units, r.slot(at.slot));  // commits one group
      } else {
        cp_async_commit();  // an empty group: wait_group below counts kWsLag newer ones
      }
      if (done >= 0 && done < num_stages) {
        store_scales<F>(sc[j], (s_begin + done) * kUnitsPerStage,
                        r.slot(at_done.slot) + Ring::kWAt +
                            threadIdx.x * row_stride<F>());
        cp_async_wait<kWsLag>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        mbar_arrive(r.full(at_done.slot));
      }
      if (i < num_stages) load_scales<F>(rp, (s_begin + i) * kUnitsPerStage, num_units, sc[j]);
      at.next();
      if (done >= 0) at_done.next();
    }
  }
  cp_async_wait<0>();
}
#endif  // FLASHSERVE_SM90A

}  // namespace
}  // namespace device::quant_gemm
}  // namespace flashserve::kernels
