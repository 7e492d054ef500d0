// quant_gemm() with QuantGemmKernel::kWgmma (kernels/quant/quant_gemm.h): Hopper's
// warpgroup MMA with the weights as the register A operand.
//
// Tiling. A CTA of one warpgroup (128 threads; 2 or 3 CTAs an SM) computes kRows = 128
// weight rows by kBM tokens (64 or 128) over a range of k (all of it, or one of `splits`
// parts), in stages of kBK = 64 elements (2 units of 32), like the mma.sync kernel
// (kernels/quant/quant_gemm.cu) whose ring, scale staging, stage copies and decoding it
// shares (quant_gemm_common.cuh). (CTAs of two warpgroups and 256 rows, as the mma.sync
// kernel's, were measured too: slower or equal almost everywhere, bench/gemm/NOTES.md.)
//   * The warpgroup's rows are two m64 tiles; warp q holds rows 16 q .. 16 q + 15 of each. Per warp, the A operand of wgmma m64nNk16 from
//     registers has the layout of mma.sync m16n8k16's A fragment (PTX ISA, "Register
//     fragments" of wgmma), so decode_fragment() produces it unchanged: a warp decodes its 32
//     rows as the mma.sync kernel's warps do.
//   * The tokens are the wgmma N dimension: one wgmma m64n{kBM}k16 per m64 tile and k16
//     step replaces kBM / 8 mma.sync and kBM / 16 ldmatrix per warp. B is the x tile
//     [kBM][64] bf16, K-major, in the 128-byte swizzle (the swizzle<64> the copies already
//     write, on a 1024-byte aligned tile: it comes first in each stage buffer).
//   * wgmma runs asynchronously: step s is issued (fence, two wgmma, commit), then
//     wait_group 1 lets step s run while the next step's A fragments are decoded; step
//     s - 1 has completed by then, so its A registers are free again.
//   * The ring is filled kStages - 2 stages ahead (not kStages - 1): at stage i's barrier
//     every warp has completed the wgmma of stage i - 2 (its wait_group 1 at stage
//     i - 1's second step), so that slot, the one the copies of stage i + kStages - 2
//     overwrite, is no longer read; stage i - 1's last wgmma may still run.
//   * cp.async writes through the generic proxy and wgmma reads through the async proxy:
//     each thread fences (fence.proxy.async) after its copies have landed, before the
//     barrier.
// One barrier a stage; split-k and its reduction as in the mma.sync kernel.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/device.h"
#include "kernels/quant/quant_gemm_common.cuh"
#include "kernels/sm90_wgmma.cuh"

namespace flashserve::kernels {
namespace device::quant_gemm {
namespace {

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
// CTAs an SM: as many as registers (64 tokens: ~150 a thread with 64 accumulators; 128
// tokens: ~200-220 with 128) and shared memory for a ring of 4 allow: 3 and 2.
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int wg_ctas_per_sm() {
  const int by_regs = 65536 / (kRows * (kBM == 64 ? 168 : 224));
  int c = by_regs < 4 ? by_regs : 4;
  while (c > 1 && c * (4 * wg_stage_bytes<F, kBM>() + kAlign + kReservedPerCta) > kSmemPerSm) {
    --c;
  }
  return c;
}
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int wg_stages() {
  const int fit = (kSmemPerSm / wg_ctas_per_sm<F, kBM>() - kAlign - kReservedPerCta) /
                  wg_stage_bytes<F, kBM>();
  return fit < 8 ? fit : 8;
}
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int wg_smem_bytes() {
  return wg_stages<F, kBM>() * wg_stage_bytes<F, kBM>() + kAlign;  // + alignment slack
}

template <WeightFormat F, int kBM>
__global__ void __launch_bounds__(kRows, (wg_ctas_per_sm<F, kBM>()))
    quant_gemm_wgmma_kernel(const QuantGemmParams p, const int splits) {
#if defined(FLASHSERVE_SM90A)
  constexpr int kStages = wg_stages<F, kBM>();
  constexpr int kAhead = kStages - 2;  // stages in flight beyond the one computed
  static_assert(kAhead >= 1);
  constexpr int kStageBytes = wg_stage_bytes<F, kBM>();
  constexpr int kWAt = x_tile_bytes<kBM>();  // the weight rows' offset in a stage
  constexpr int kAcc = kBM / 2;              // accumulators a thread and m64 tile
  extern __shared__ uint4 smem_raw[];
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem_raw) +
                  ((kAlign - (smem_addr(smem_raw) & (kAlign - 1))) & (kAlign - 1));

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tok0 = blockIdx.x * kBM, row0 = blockIdx.y * kRows, split = blockIdx.z;
  const int num_units = p.k / kQuantUnit;
  const int total_stages = (num_units + kUnitsPerStage - 1) / kUnitsPerStage;
  const int per_split = (total_stages + splits - 1) / splits;
  const int s_begin = split * per_split, s_end = min(total_stages, s_begin + per_split);
  const int num_stages = max(s_end - s_begin, 0);
  const QuantLayout l = quant_layout(F, p.n, p.k);
  // Thread t stages the scales of row t.
  const RowPtrs rp = row_ptrs<F>(static_cast<const uint8_t*>(p.w), l,
                                 min(row0 + static_cast<int>(threadIdx.x), p.n - 1));
  auto slot = [&](int i) { return ring + (i % kStages) * kStageBytes; };
  auto scale_row = [&](int i) { return slot(i) + kWAt + threadIdx.x * row_stride<F>(); };

  // The scales go through registers two stages ahead of their store (sc[0] holds stages
  // kAhead, kAhead + 2, ..., sc[1] the others), so that a load has two stages to land: with
  // one, every warp waits on it right after the barrier, with nothing else to run.
  constexpr int kScaleDepth = 2;
  ScaleWords sc[kScaleDepth];
  for (int i = 0; i < kAhead && i < num_stages; ++i) {
    load_scales<F>(rp, (s_begin + i) * kUnitsPerStage, num_units, sc[0]);
    store_scales<F>(sc[0], (s_begin + i) * kUnitsPerStage, scale_row(i));
  }
  wait_for_prior_grid();
  const StageCopier<F, kBM, kWAt, 0, kRows> copier(p, l, row0, tok0);
  for (int i = 0; i < kAhead; ++i) {
    if (i < num_stages) {
      copier.issue(p, s_begin + i, num_units, slot(i));
    } else {
      cp_async_commit();
    }
  }
#pragma unroll
  for (int b = 0; b < kScaleDepth; ++b) {
    if (kAhead + b < num_stages) {
      load_scales<F>(rp, (s_begin + kAhead + b) * kUnitsPerStage, num_units, sc[b]);
    }
  }

  const uint32_t k43 = bf16_magic();
  float acc[2][kAcc];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[mt][i] = 0.f;
  }
  // This lane's rows in the stage: 64 mt + 16 warp + g (+ 8).
  const int my_row = 16 * warp + g;
  // Stage i, whose next-but-kAhead stage's scales are in `held`.
  auto stage = [&](int i, ScaleWords& held) {
    cp_async_wait<kAhead - 1>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();  // stage i has landed; nobody reads slot(i - 2) any more (see the top)
    const int next = i + kAhead;
    if (next < num_stages) {
      copier.issue(p, s_begin + next, num_units, slot(next));
      store_scales<F>(held, (s_begin + next) * kUnitsPerStage, scale_row(next));
      if (next + kScaleDepth < num_stages) {
        load_scales<F>(rp, (s_begin + next + kScaleDepth) * kUnitsPerStage, num_units, held);
      }
    } else {
      cp_async_commit();
    }
    const uint8_t* buf = slot(i);
    const uint8_t* rows0 = buf + kWAt + my_row * row_stride<F>();
// One unit at a time, its words read once for both k16 steps (as the mma.sync kernel).
#pragma unroll 1
    for (int j = 0; j < kUnitsPerStage; ++j) {
      RowUnit<F> rows[2][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        rows[mt][0] = load_row_unit<F>(rows0 + 64 * mt * row_stride<F>(), j, t);
        rows[mt][1] = load_row_unit<F>(rows0 + (64 * mt + 8) * row_stride<F>(), j, t);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          decode_fragment<F>(rows[mt][0], rows[mt][1], h, t, k43, a[mt]);
        }
        // k16 step 2 j + h: 32 bytes into the x tile's 128-byte rows.
        const uint64_t desc = sw128_desc(buf + 32 * (2 * j + h), 16, 1024);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        wgmma_rs<__nv_bfloat16, kBM>(acc[0], a[0], desc);
        wgmma_rs<__nv_bfloat16, kBM>(acc[1], a[1], desc);
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
      }
    }
  };
  for (int i = 0; i < num_stages; i += 2) {  // two at a time: sc[] indices stay constants
    stage(i, sc[0]);
    if (i + 1 < num_stages) stage(i + 1, sc[1]);
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  fence_operands(acc[0]);
  fence_operands(acc[1]);
  cp_async_wait<0>();
  allow_next_grid();

  // Accumulator i of an m64 tile: n8 tile i / 4, element i % 4 of the mma.sync C layout.
  float* partial = splits > 1 ? p.partials + int64_t{split} * p.m * p.n : nullptr;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) {
      const int f = row0 + my_row + 64 * mt + 8 * ((i % 4) / 2);
      const int tok = tok0 + 8 * (i / 4) + 2 * t + i % 2;
      if (f >= p.n || tok >= p.m) continue;
      if (partial != nullptr) {
        partial[int64_t{tok} * p.n + f] = acc[mt][i];
      } else {
        store_output(p, f, tok, acc[mt][i]);
      }
    }
  }
#endif
}

template <WeightFormat F, int kBM>
struct WgSmemTag {};

// The k splits for CTAs of `rows` rows and bm tokens, c of them an SM, on num_sms SMs: the
// count that minimises a model of the time in stage times: rounds of CTAs x (a split's
// stages + ~2 for the ramp and the epilogue), plus the reduction's fp32 traffic (~1.8 MB a
// stage time). Unlike the mma.sync kernel's "fill every SM" this sees that 48 tiles in 3
// splits on 132 SMs take two rounds. Each split keeps >= 4 stages; the partial sums fit
// p.partials.
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
  return best;
}

// 64-token tiles up to 64 tokens, else 128.
template <WeightFormat F, int kBM>
absl::Status launch_wgmma(const QuantGemmParams& p, int num_sms, cudaStream_t stream) {
  auto* kernel = quant_gemm_wgmma_kernel<F, kBM>;
  constexpr int smem = wg_smem_bytes<F, kBM>();
  if (absl::Status s = set_smem_limit_once<WgSmemTag<F, kBM>>(kernel, smem); !s.ok()) return s;
  const int splits = wgmma_splits(p, kRows, kBM, wg_ctas_per_sm<F, kBM>(), num_sms);
  const dim3 grid(static_cast<unsigned>((p.m + kBM - 1) / kBM),
                  static_cast<unsigned>((p.n + kRows - 1) / kRows), splits);
  CUDA_CHECK(launch_dependent(kernel, grid, kRows, smem, stream, p, splits));
  return reduce_splits(p, splits, stream);
}

}  // namespace

absl::Status quant_gemm_wgmma(const QuantGemmParams& p, int num_sms, cudaStream_t stream) {
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    constexpr WeightFormat F = decltype(tag)::value;
    if (p.m > 64) return launch_wgmma<F, 128>(p, num_sms, stream);
    return launch_wgmma<F, 64>(p, num_sms, stream);
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
