// quant_gemm() of kernels/quant/quant_gemm.h: its dispatch, and the mma.sync kernel
// (QuantGemmKernel::kMmaSync, sm_80+). The Hopper kernel (kWgmmaWs) is
// kernels/quant/quant_gemm_sm90.cu; what both share, kernels/quant/quant_gemm_common.cuh.
//
// Tiling. A CTA of 8 warps computes a tile of kBN = 256 weight rows (output features) by kBM
// tokens (32 or 64) over a range of k (all of it, or one of `splits` equal parts), in stages
// of kBK = 64 elements (2 units of 32). Warp w owns rows 32 w .. 32 w + 31 (two m16 tiles,
// the mma's A operand) and all kBM tokens (kBM / 8 n8 tiles, the B operand).
//   1. A ring of kStages stage buffers in shared memory, filled kStages - 1 stages ahead:
//      by cp.async the stage's quant bytes of the 256 rows (qs, and qh for Q5_K / Q6_K,
//      kernels/quant/quant_layout.h) and its x rows [kBM][64] bf16 (XOR-swizzled); the
//      scales through registers: thread t loads row t's scale words for stage s + kStages - 1
//      while stage s computes, and one stage later stores them decoded — per unit the two
//      floats of the element formula below — beside the row's quants. The weights are the
//      stream that must not stall: with 3 stages of ~12 KB in flight per CTA and two CTAs an
//      SM, ~70 KB an SM are in flight, above what 4.8 TB/s x ~1 us of latency over 132 SMs
//      needs (~36 KB).
//   2. Each warp decodes its A fragments straight from the ring into registers: for a k16
//      step, lane (g, t) needs elements 2t, 2t + 1, 2t + 8, 2t + 9 of rows g and g + 8 — bytes
//      2t, 2t + 1, 2t + 8, 2t + 9 of the unit's 16 qs bytes (low nibbles for the unit's
//      first 16 elements, high nibbles for the second) — two 16-bit shared loads a row and
//      unit serve both k16 steps of the unit. Element values in bf16x2 arithmetic
//      (decode_pair: a byte permute, a subtraction and an FMA per pair); no weight tile in
//      shared memory, no second barrier.
//   3. B fragments by ldmatrix from the x tile; 16 mma.sync a k16 step and warp at kBM = 64.
// One barrier a stage (the stage has landed; everyone is done with the buffer the next
// issue overwrites).
// With splits > 1 (small grids: a decode step's 64 tokens of a 4096-row projection make 16
// tiles for 132 SMs) each CTA writes fp32 partial sums to `partials` and a second kernel
// adds the splits in a fixed order and applies the output: deterministic, whatever the
// schedule.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/quant/quant_gemm_common.cuh"

namespace flashserve::kernels {
namespace device::quant_gemm {
namespace {

template <WeightFormat F, int kBM>
__host__ __device__ constexpr int stage_bytes() { return kBN * row_stride<F>() + kBM * kBK * 2; }
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int smem_bytes(int stages) { return stages * stage_bytes<F, kBM>(); }
// Ring depth: 4 stages where two CTAs of 4 still share an SM's 228 KB (1 KB reserved per
// CTA), else 3.
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int ring_stages() {
  return 2 * (smem_bytes<F, kBM>(4) + 1024) <= 228 * 1024 ? 4 : 3;
}

// CTAs an SM holds: the register budget follows (64K / (256 x 2) = 128 a thread for two).
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int ctas_per_sm() {
  return 2 * (smem_bytes<F, kBM>(ring_stages<F, kBM>()) + 1024) <= 228 * 1024 ? 2 : 1;
}

template <WeightFormat F, int kBM>
__global__ void __launch_bounds__(kThreads, (ctas_per_sm<F, kBM>())) quant_gemm_kernel(
    const QuantGemmParams p, const int splits) {
  constexpr int kNTiles = kBM / 8;
  constexpr int kStages = ring_stages<F, kBM>();
  constexpr int kStageBytes = stage_bytes<F, kBM>();
  extern __shared__ uint4 smem_raw[];
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem_raw);  // [kStages][kStageBytes]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int tok0 = blockIdx.x * kBM, row0 = blockIdx.y * kBN, split = blockIdx.z;
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
  auto scale_row = [&](int i) { return slot(i) + threadIdx.x * row_stride<F>(); };

  // The weights are written by no kernel of a step: the first scales load before the
  // wait; x (and the ring, which x shares) after it.
  ScaleWords sc;
  for (int i = 0; i < kStages - 1 && i < num_stages; ++i) {
    load_scales<F>(rp, (s_begin + i) * kUnitsPerStage, num_units, sc);
    store_scales<F>(sc, (s_begin + i) * kUnitsPerStage, scale_row(i) + scale_at<F>());
  }
  wait_for_prior_grid();
  const StageCopier<F, kBM, 0, kBN * row_stride<F>(), kBN> copier(p, l, row0, tok0);
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < num_stages) {
      copier.issue(p, s_begin + i, num_units, slot(i));
    } else {
      cp_async_commit();
    }
  }
  if (kStages - 1 < num_stages) {
    load_scales<F>(rp, (s_begin + kStages - 1) * kUnitsPerStage, num_units, sc);
  }

  const uint32_t k43 = bf16_magic();
  float acc[2][kNTiles][4] = {};
  const uint8_t* my_rows[2][2];  // [m16 tile][g or g + 8], set per stage
  for (int i = 0; i < num_stages; ++i) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage i has landed (its scales were stored before an earlier barrier)
    const int next = i + kStages - 1;
    if (next < num_stages) {
      copier.issue(p, s_begin + next, num_units, slot(next));
      store_scales<F>(sc, (s_begin + next) * kUnitsPerStage, scale_row(next) + scale_at<F>());
      if (next + 1 < num_stages) {
        load_scales<F>(rp, (s_begin + next + 1) * kUnitsPerStage, num_units, sc);
      }
    } else {
      cp_async_commit();
    }
    const uint8_t* buf = slot(i);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      my_rows[mt][0] = buf + (kRowsPerWarp * warp + 16 * mt + g) * row_stride<F>();
      my_rows[mt][1] = my_rows[mt][0] + 8 * row_stride<F>();
    }
    const __nv_bfloat16* xs = reinterpret_cast<const __nv_bfloat16*>(buf + kBN * row_stride<F>());
// One unit at a time: its quant and scale words are read once for both k16 steps; not
    // unrolled further, the registers go to the accumulators.
#pragma unroll 1
    for (int j = 0; j < kUnitsPerStage; ++j) {
      RowUnit<F> rows[2][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        rows[mt][0] = load_row_unit<F>(my_rows[mt][0], j, t);
        rows[mt][1] = load_row_unit<F>(my_rows[mt][1], j, t);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int kk = 2 * j + h;
        uint32_t a[2][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          decode_fragment<F>(rows[mt][0], rows[mt][1], h, t, k43, a[mt]);
        }
#pragma unroll
        for (int np = 0; np < kNTiles / 2; ++np) {
          uint32_t b[4];
          const int tok = 16 * np + lane % 8 + 8 * (lane / 16);
          ldmatrix_x4(b, smem_addr(xs + swizzle<kBK>(tok, 16 * kk + 8 * ((lane / 8) % 2))));
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            mma_16816<__nv_bfloat16>(acc[mt][2 * np], a[mt], b[0], b[1]);
            mma_16816<__nv_bfloat16>(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  allow_next_grid();

  float* partial = splits > 1 ? p.partials + int64_t{split} * p.m * p.n : nullptr;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int f = row0 + kRowsPerWarp * warp + 16 * mt + g + 8 * (c / 2);
        const int tok = tok0 + 8 * nt + 2 * t + c % 2;
        if (f >= p.n || tok >= p.m) continue;
        if (partial != nullptr) {
          partial[int64_t{tok} * p.n + f] = acc[mt][nt][c];
        } else {
          store_output(p, f, tok, acc[mt][nt][c]);
        }
      }
    }
  }
}

template <WeightFormat F, int kBM>
struct SmemTag {};

// The tiling of one call: token tile, k splits.
struct Plan {
  int bm = 64, splits = 1;
};

// 64-token tiles (32 for m <= 32); where they do not give every SM two CTAs, k is split so
// that they do (each split keeps >= 4 stages and the partial sums fit p.partials).
Plan plan(const QuantGemmParams& p, int num_sms) {
  const int64_t columns = (p.n + kBN - 1) / kBN;
  Plan pl;
  pl.bm = p.m > 32 ? 64 : 32;
  pl.splits = choose_splits(p, columns * ((p.m + pl.bm - 1) / pl.bm), 2 * int64_t{num_sms});
  return pl;
}

template <WeightFormat F, int kBM>
absl::Status launch(const QuantGemmParams& p, const Plan& pl, cudaStream_t stream) {
  auto* kernel = quant_gemm_kernel<F, kBM>;
  constexpr int smem = smem_bytes<F, kBM>(ring_stages<F, kBM>());
  if (absl::Status s = set_smem_limit_once<SmemTag<F, kBM>>(kernel, smem); !s.ok()) return s;
  const dim3 grid((p.m + kBM - 1) / kBM, (p.n + kBN - 1) / kBN, pl.splits);
  CUDA_CHECK(launch_dependent(kernel, grid, kThreads, smem, stream, p, pl.splits));
  return reduce_splits(p, pl.splits, stream);
}

}  // namespace
}  // namespace device::quant_gemm

int quant_gemm_max_tokens() {
  // mma.sync: up to 64 tokens (bench/gemm/RESULTS_quant_gemm_v4.md). The warp-specialized
  // wgmma kernel (Hopper): up to 512. At 256 it beats deq+blas by far (8B layer 222 against
  // 324 us); at 512, since the lean epilogue, on the 8B's Q4_K gate_up (200 against 234 us)
  // and down (96 against 116) and about ties on Q6_K, and in the model the TTFT of a
  // 512-token prompt (8B Q4_K_M) went from 16.8 to 15.2 ms with the limit at 512 instead of
  // 256 (same call; bf16 12.8). Measurements: bench/gemm/NOTES.md.
  constexpr int kMmaSyncMaxTokens = 64, kWgmmaMaxTokens = 512;
  return quant_gemm_wgmma_supported() ? kWgmmaMaxTokens : kMmaSyncMaxTokens;
}

bool quant_gemm_supported(WeightFormat f, int k) {
  return f != WeightFormat::kBf16 && k > 0 && quant_layout_ok(f, k);
}

bool quant_gemm_narrow_supported(int k, int row_tile, int token_tile) {
  return device::quant_gemm::narrow_tile_fits(row_tile, token_tile, k);
}

int64_t quant_gemm_partials_floats(int num_sms) {
  // plan() splits only grids of fewer than 2 * num_sms CTAs of kBN x 64 (or 32) outputs,
  // into at most 2 * num_sms + (CTAs - 1) < 4 * num_sms tiles.
  return 4 * int64_t{std::max(num_sms, 1)} * device::quant_gemm::kBN * 64;
}

absl::Status quant_gemm(const QuantGemmParams& p, int num_sms, cudaStream_t stream,
                        int* splits_out) {
  int splits = 1;
  if (splits_out == nullptr) splits_out = &splits;
  *splits_out = 1;
  if (!quant_gemm_supported(p.format, p.k) || p.m < 1 || p.n < 1 || p.ldy < p.n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_gemm: unsupported ", weight_format_name(p.format), " shape m ", p.m, ", n ", p.n,
        ", k ", p.k, ", ldy ", p.ldy));
  }
  if (p.output != GemvOutput::kBf16 && p.output != GemvOutput::kFp32 &&
      p.output != GemvOutput::kFp32Accumulate) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_gemm: unsupported output ", static_cast<int>(p.output),
        " (supported: bf16, fp32, fp32 accumulate)"));
  }
  QuantGemmKernel kernel = p.kernel;
  if (kernel == QuantGemmKernel::kAuto) {
    // Measured on the H200 (bench/gemm/results_v9/, the 8B and 1B layers, Q4_K and the other
    // formats): the warp-specialized kernel is faster than mma.sync at every m from 16 to 512
    // and every shape. Elsewhere mma.sync. Small matrices at small m: the narrow kernel
    // (bench/gemm/NOTES.md, twenty-fourth session).
    if (p.m <= kQuantGemmNarrowMaxTokens && int64_t{p.n} * p.k <= kQuantGemmNarrowMaxElements &&
        p.k <= kQuantGemmNarrowMaxK) {
      kernel = QuantGemmKernel::kNarrow;
    } else {
      kernel = quant_gemm_wgmma_supported() ? QuantGemmKernel::kWgmmaWs : QuantGemmKernel::kMmaSync;
    }
  }
  if (p.token_tile != 0 &&
      (kernel == QuantGemmKernel::kMmaSync ||
       (kernel == QuantGemmKernel::kWgmmaWs && p.token_tile != 64 && p.token_tile != 128 &&
        p.token_tile != 256) ||
       (kernel == QuantGemmKernel::kNarrow && p.token_tile != 16 && p.token_tile != 32 &&
        p.token_tile != 64))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_gemm: token tile ", p.token_tile,
        " (the wgmma kernel takes 64, 128 or 256, the narrow kernel 16, 32 or 64; the mma.sync "
        "kernel chooses its own)"));
  }
  if (p.row_tile != 0 &&
      (kernel != QuantGemmKernel::kNarrow || (p.row_tile != 16 && p.row_tile != 32))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_gemm: row tile ", p.row_tile, " (the narrow kernel takes 16 or 32; the others "
        "choose their own)"));
  }
  if (quant_layout(p.format, p.n, p.k).total_bytes >= (int64_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_gemm: a ", weight_format_name(p.format), " tensor of ", p.n, " x ", p.k,
        " takes 4 GiB or more (the kernel addresses it with 32-bit offsets)"));
  }
  if (p.w == nullptr || p.x == nullptr || p.y == nullptr ||
      reinterpret_cast<uintptr_t>(p.w) % 16 != 0 || reinterpret_cast<uintptr_t>(p.x) % 16 != 0 ||
      (p.partials_floats > 0 && p.partials == nullptr)) {
    return absl::InvalidArgumentError("quant_gemm: a pointer is null or not 16-byte aligned");
  }
  if (kernel == QuantGemmKernel::kWgmmaWs) {
    if (!quant_gemm_wgmma_supported()) {
      return absl::InvalidArgumentError(
          "quant_gemm: the warp-specialized wgmma kernel needs a Hopper GPU (compute capability "
          "9.0)");
    }
    return device::quant_gemm::quant_gemm_wgmma_ws(p, std::max(num_sms, 1), stream, splits_out);
  }
  if (kernel == QuantGemmKernel::kNarrow) {
    return device::quant_gemm::quant_gemm_narrow(p, stream);
  }
  const device::quant_gemm::Plan pl = device::quant_gemm::plan(p, std::max(num_sms, 1));
  *splits_out = pl.splits;
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    constexpr WeightFormat F = decltype(tag)::value;
    if (pl.bm == 64) return device::quant_gemm::launch<F, 64>(p, pl, stream);
    return device::quant_gemm::launch<F, 32>(p, pl, stream);
  });
}

absl::Status quant_gemm_reduce(const QuantGemmParams& p, int splits, cudaStream_t stream) {
  if (splits <= 1) return absl::OkStatus();
  if (p.partials == nullptr || p.y == nullptr || p.m < 1 || p.n < 1 || p.ldy < p.n ||
      int64_t{splits} * p.m * p.n > p.partials_floats) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_gemm_reduce: ", splits, " splits of ", p.m, " x ", p.n,
        " do not fit the partials, or a pointer is null"));
  }
  QuantGemmParams r = p;
  r.defer_reduction = false;
  return device::quant_gemm::reduce_splits(r, splits, stream);
}

}  // namespace flashserve::kernels
