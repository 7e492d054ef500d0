#pragma once
// The warp-specialized Hopper prefill's shape (kernels/attention/attention_prefill_sm90_ws.cuh):
// warpgroups, register budgets, tile sizes and shared memory, shared by the kernel, its walks
// (attention_prefill_sm90_walks.cuh) and its launcher (attention_prefill.cu).
#include "kernels/setmaxnreg.h"

namespace flashserve::kernels::device {

// Consumer warpgroups (64 query rows each). d128: 2, since O (64) + S (64) + P (32) accumulator
// registers need ~205 per thread and 3 x 232 + producer would not fit 64K registers. d64: 3,
// since O shrinks to 32 registers, ~150 fit 160 each (128 x (3 x 160 + 32) = 65536), and a
// K/V tile in shared memory then serves 192 rows instead of 128 (FA3's 192 x 128 for hdim 64).
constexpr int sm90ws_consumer_warpgroups(int head_dim) { return head_dim == 64 ? 3 : 2; }
constexpr int sm90ws_consumer_threads(int head_dim) {
  return 128 * sm90ws_consumer_warpgroups(head_dim);
}
// One producer warpgroup on top (setmaxnreg works per warpgroup, so the producer is 128 threads).
constexpr int sm90ws_threads(int head_dim) { return sm90ws_consumer_threads(head_dim) + 128; }
// setmaxnreg budgets, sum over the CTA <= its launch registers (below): d128 128 * (2 * 232 +
// 40) = 64512 = 384 * 168; d64 128 * (3 * 160 + 32) = 65536 = 512 * 128 (the d64 producer
// keeps one destination base per thread: J = 1).
constexpr int sm90ws_consumer_regs(int head_dim) { return head_dim == 64 ? 160 : 232; }
constexpr int sm90ws_producer_regs(int head_dim) { return head_dim == 64 ? 32 : 40; }
constexpr int sm90ws_block_m(int head_dim) { return 64 * sm90ws_consumer_warpgroups(head_dim); }
// 128 keys: S is one m64n128 wgmma chain per warpgroup; a wider tile would add 32+ S/P
// registers per consumer thread, which d64's 160 cannot hold.
constexpr int sm90ws_block_n() { return 128; }
// Two stages: a third did not help (measured: bench/attention/NOTES.md), and d128 at 2 stages
// is already 160 KiB of shared memory.
constexpr int sm90ws_stages() { return 2; }
// Q (two in the persistent form: the next tile's Q loads while the current one is read) +
// kStages K + kStages V tiles, 1 KiB to align them to 1024 B, 256 B for the mbarriers
// (d128: 161 KiB, persistent 193 KiB; d64: 89 KiB, persistent 113 KiB).
constexpr int sm90ws_smem_bytes(int head_dim, bool persistent = false) {
  return ((persistent ? 2 : 1) * sm90ws_block_m(head_dim) +
          2 * sm90ws_stages() * sm90ws_block_n()) * head_dim * 2 +
         1024 + 256;
}
// The budgets move registers inside the pool the CTA is launched with (kernels/setmaxnreg.h):
// 384 x 168 at d128, 512 x 128 at d64.
static_assert(setmaxnreg_budgets_fit(sm90ws_producer_regs(64), sm90ws_consumer_warpgroups(64),
                                     sm90ws_consumer_regs(64)) &&
                  setmaxnreg_budgets_fit(sm90ws_producer_regs(128), sm90ws_consumer_warpgroups(128),
                                         sm90ws_consumer_regs(128)),
              "setmaxnreg budgets exceed the registers the CTA is launched with");

}  // namespace flashserve::kernels::device
