#pragma once
// setmaxnreg's register pool, for the warp-specialized Hopper kernels that move registers from
// their producer warpgroup to their consumers (kernels/attention/attention_prefill_sm90_shape.cuh,
// kernels/quant/quant_gemm_sm90.cu). Plain C++: the kernels' budgets are checked at compile time.

namespace flashserve::kernels {

// setmaxnreg's register pool. A kernel with __launch_bounds__(threads, 1) that uses setmaxnreg
// is launched at 65536 / threads registers a thread, rounded down to the 8-register allocation
// unit (ptxas allocates exactly that cap: cuobjdump --dump-resource-usage reads REG:168 for
// 384 threads, REG:128 for 512). setmaxnreg only moves registers between the CTA's
// warpgroups inside that pool: a setmaxnreg.inc asking for more than the decs returned waits
// for ever, so the warpgroups' budgets must sum to threads x that cap, not to the 65,536 of
// the register file (bench/attention/NOTES.md "Session 57": a 216 / 80 split at 384 threads
// summed to 65,536 and hung).
constexpr int setmaxnreg_launch_regs(int threads) { return 65536 / threads / 8 * 8; }
// Budgets of `warpgroups` consumer warpgroups at `regs` registers a thread, plus one producer
// warpgroup at `producer_regs`, inside the pool of their CTA (128 x (warpgroups + 1) threads).
constexpr bool setmaxnreg_budgets_fit(int producer_regs, int warpgroups, int regs) {
  const int threads = 128 * (warpgroups + 1);
  return 128 * (producer_regs + warpgroups * regs) <= threads * setmaxnreg_launch_regs(threads);
}
static_assert(setmaxnreg_launch_regs(384) == 168 && setmaxnreg_launch_regs(512) == 128);
static_assert(setmaxnreg_budgets_fit(40, 2, 232) && !setmaxnreg_budgets_fit(80, 2, 216));

}  // namespace flashserve::kernels
