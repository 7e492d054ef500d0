// quant_gemm() of kernels/quant/quant_gemm.h.
//
// Tiling. A CTA of 8 warps computes a tile of kBN = 128 weight rows (output features) by kBM
// tokens (32 or 64) over a range of k (all of it, or one of `splits` equal parts), in stages
// of kBK = 128 elements (4 units of 32):
//   1. a ring of kStages stage buffers in shared memory is filled by cp.async, kStages - 1
//      stages ahead: the stage's quant bytes of the 128 rows (qs, and qh for Q5_K / Q6_K,
//      kernels/quant/quant_layout.h: 64-160 bytes a row) and its x rows [kBM][128] bf16.
//      The weights are the stream that must never stall: with kStages - 1 = 2-3 stages of
//      ~8 KB in flight per CTA and two CTAs an SM, ~32-48 KB an SM are in flight, what
//      4.8 TB/s x ~1 us of latency over 132 SMs needs;
//   2. thread t decodes units 2 (t % 2), +1 of row t / 2 of the stage from the ring (scales
//      read through L1: kernels/quant/quant_gemv.cuh load_unit_scales, prefetched when the
//      stage is issued) to ggml's fp32 values rounded to bf16 (quant::unit_element, the
//      operations of dequantize_bf16), into the weight tile [128][128] bf16;
//   3. warp w multiplies rows 32 (w % 4) .. +32 of the weight tile (the mma's A operand, two
//      m16 tiles) by tokens (kBM / 2) (w / 4) .. + kBM / 2 of the stage's x tile (B), 8 k16
//      steps, fragments by ldmatrix from XOR-swizzled rows (kernels/mma_sync.cuh).
// Two barriers a stage: after the stage has landed (then the next stage is issued into the
// buffer everyone has finished with), and after the decode. Within a CTA decoding and mma
// alternate; the second CTA of the SM fills the other's gaps.
// With splits > 1 (small grids: a decode step's 64 tokens of a 4096-row projection make 32
// tiles for 132 SMs) each CTA writes fp32 partial sums to `partials` and a second kernel
// adds the splits in a fixed order and applies the output: deterministic, whatever the
// schedule.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/cuda_plumbing.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/mma_sync.cuh"
#include "kernels/quant/quant_gemm.h"
#include "kernels/quant/quant_gemv.cuh"

namespace flashserve::kernels {
namespace device::quant_gemm {
namespace {

using kernels::quant::Unit;
using kernels::quant::UnitRaw;
using quant_gemv::load_unit_scales;
using quant_gemv::row_ptrs;
using quant_gemv::RowPtrs;

constexpr int kThreads = 256;
constexpr int kBN = 128;             // weight rows per CTA
constexpr int kBK = 128;             // elements of k per stage
constexpr int kUnitsPerStage = kBK / kQuantUnit;
constexpr int kUnitsPerThread = 2;   // kBN * kUnitsPerStage / kThreads

// Bytes of one row's quant data in a ring stage: qs (16 a unit; Q8_0 twice: its two
// halves), then qh (Q5_K 4, Q6_K 8 a unit).
template <WeightFormat F>
__host__ __device__ constexpr int qs_stage_bytes() {
  return (F == WeightFormat::kQ8_0 ? 32 : 16) * kUnitsPerStage;
}
template <WeightFormat F>
__host__ __device__ constexpr int qh_stage_bytes() {
  return F == WeightFormat::kQ5_K ? 4 * kUnitsPerStage
         : F == WeightFormat::kQ6_K ? 8 * kUnitsPerStage : 0;
}
template <WeightFormat F>
__host__ __device__ constexpr int raw_row_bytes() { return qs_stage_bytes<F>() + qh_stage_bytes<F>(); }

template <WeightFormat F, int kBM>
__host__ __device__ constexpr int ring_stage_bytes() { return kBN * raw_row_bytes<F>() + kBM * kBK * 2; }

// Ring depth: 4 stages at kBM = 32, 3 at 64 (so that two CTAs share an SM's 228 KB where
// the format's bytes allow).
template <int kBM>
__host__ __device__ constexpr int ring_stages() { return kBM <= 32 ? 4 : 3; }

template <WeightFormat F, int kBM>
__host__ __device__ constexpr int smem_bytes() {
  return ring_stages<kBM>() * ring_stage_bytes<F, kBM>() + kBN * kBK * 2;
}

__device__ __forceinline__ void prefetch_l1(const void* p) {
  asm volatile("prefetch.global.L1 [%0];" ::"l"(p));
}

// Issues stage `stage` (global unit index u_begin = stage * kUnitsPerStage) into ring
// buffer `buf`: the quant bytes of the CTA's rows and the x rows of its tokens; units past
// the row's end and tokens past m are zero-filled. Commits one cp.async group (possibly
// empty, so that every thread counts the same groups).
template <WeightFormat F, int kBM>
__device__ __forceinline__ void issue_stage(const QuantGemmParams& p, const QuantLayout& l,
                                            int row0, int tok0, int stage, int num_units,
                                            uint8_t* buf) {
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const int u_begin = stage * kUnitsPerStage;
  constexpr int kChunksPerRow = raw_row_bytes<F>() / 16;
  for (int i = threadIdx.x; i < kBN * kChunksPerRow; i += kThreads) {
    const int r = i / kChunksPerRow, c = i % kChunksPerRow;
    const int row = min(row0 + r, p.n - 1);
    const uint8_t* src;
    bool valid;
    if (c < qs_stage_bytes<F>() / 16) {
      // qs: chunk c is unit c (Q8_0: c < 4 the units' first halves, c >= 4 their second).
      const int u = u_begin + c % kUnitsPerStage;
      valid = u < num_units;
      src = w + l.qs_offset + int64_t{row} * l.qs_row_bytes + 16 * u +
            (c >= kUnitsPerStage ? l.qs_row_bytes / 2 : 0);
    } else {
      // qh: 16 bytes hold 4 (Q5_K) or 2 (Q6_K) units' words.
      const int c_h = c - qs_stage_bytes<F>() / 16;
      const int per_chunk = F == WeightFormat::kQ5_K ? 4 : 2;
      const int u = u_begin + per_chunk * c_h;
      valid = u < num_units;
      src = w + l.qh_offset + int64_t{row} * l.qh_row_bytes + (16 / per_chunk) * u;
    }
    cp_async_16(smem_addr(buf + r * raw_row_bytes<F>() + 16 * c), valid ? src : w, valid);
  }
  // The scales the decode reads through L1, asked for now.
  if (threadIdx.x < kBN && u_begin < num_units) {
    const RowPtrs rp = row_ptrs<F>(w, l, min(row0 + threadIdx.x, p.n - 1));
    prefetch_l1(rp.scale + (F == WeightFormat::kQ4_K || F == WeightFormat::kQ5_K
                                ? 16 * (u_begin / 8)
                                : (F == WeightFormat::kQ4_1 ? 4 : 2) * u_begin));
  }
  __nv_bfloat16* x_tile = reinterpret_cast<__nv_bfloat16*>(buf + kBN * raw_row_bytes<F>());
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x);
  constexpr int kXChunks = kBM * kBK / 8;
#pragma unroll
  for (int i = threadIdx.x; i < kXChunks; i += kThreads) {
    const int row = i / (kBK / 8), col = 8 * (i % (kBK / 8));
    const int tok = tok0 + row, kk = stage * kBK + col;
    const bool valid = tok < p.m && kk < p.k;
    const __nv_bfloat16* src = valid ? x + static_cast<int64_t>(tok) * p.k + kk : x;
    cp_async_16(smem_addr(x_tile + swizzle<kBK>(row, col)), src, valid);
  }
  cp_async_commit();
}

// Decodes this thread's two units of the stage in `buf` into the weight tile.
template <WeightFormat F>
__device__ __forceinline__ void decode_stage(const RowPtrs& rp, const uint8_t* buf, int stage,
                                             int num_units, __nv_bfloat16* tile) {
  const int r = threadIdx.x / 2, j0 = kUnitsPerThread * (threadIdx.x % 2);
  const uint8_t* raw_row = buf + r * raw_row_bytes<F>();
#pragma unroll 1  // one unit's words at a time: the registers go to the accumulators
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int j = j0 + i, u = stage * kUnitsPerStage + j;
    uint32_t out[16];
    if (u < num_units) {
      UnitRaw raw;
      const uint4 q = *reinterpret_cast<const uint4*>(raw_row + 16 * j);
      raw.qs[0] = q.x, raw.qs[1] = q.y, raw.qs[2] = q.z, raw.qs[3] = q.w;
      if constexpr (F == WeightFormat::kQ8_0) {
        const uint4 h = *reinterpret_cast<const uint4*>(raw_row + 16 * (kUnitsPerStage + j));
        raw.qs[4] = h.x, raw.qs[5] = h.y, raw.qs[6] = h.z, raw.qs[7] = h.w;
      }
      if constexpr (F == WeightFormat::kQ5_K) {
        raw.qh[0] = *reinterpret_cast<const uint32_t*>(raw_row + qs_stage_bytes<F>() + 4 * j);
      }
      if constexpr (F == WeightFormat::kQ6_K) {
        const uint2 h = *reinterpret_cast<const uint2*>(raw_row + qs_stage_bytes<F>() + 8 * j);
        raw.qh[0] = h.x, raw.qh[1] = h.y;
      }
      load_unit_scales<F>(rp, u, raw);
      const Unit w = quant::decode_unit<F>(raw, u);
#pragma unroll
      for (int e = 0; e < kQuantUnit; e += 2) {
        const __nv_bfloat162 b = __floats2bfloat162_rn(quant::unit_element<F>(w, e),
                                                       quant::unit_element<F>(w, e + 1));
        out[e / 2] = *reinterpret_cast<const uint32_t*>(&b);
      }
    } else {
#pragma unroll
      for (int e = 0; e < 16; ++e) out[e] = 0;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      *reinterpret_cast<uint4*>(tile + swizzle<kBK>(r, kQuantUnit * j + 8 * c)) =
          make_uint4(out[4 * c], out[4 * c + 1], out[4 * c + 2], out[4 * c + 3]);
    }
  }
}

// The output rule of QuantGemmParams::output for one value.
__device__ __forceinline__ void store_output(const QuantGemmParams& p, int f, int tok, float v) {
  const int64_t at = static_cast<int64_t>(tok) * p.ldy + f;
  if (p.output == GemvOutput::kBf16) {
    static_cast<__nv_bfloat16*>(p.y)[at] = __float2bfloat16_rn(v);
  } else if (p.output == GemvOutput::kFp32) {
    static_cast<float*>(p.y)[at] = v;
  } else {
    static_cast<float*>(p.y)[at] += v;
  }
}

// CTAs an SM holds (228 KB of shared memory, 1 KB of it reserved per CTA): the register
// budget follows (64K / (256 x 2) = 128 registers a thread for two).
template <WeightFormat F, int kBM>
__host__ __device__ constexpr int ctas_per_sm() { return 2 * (smem_bytes<F, kBM>() + 1024) <= 228 * 1024 ? 2 : 1; }

template <WeightFormat F, int kBM>
__global__ void __launch_bounds__(kThreads, (ctas_per_sm<F, kBM>())) quant_gemm_kernel(const QuantGemmParams p,
                                                              const int splits) {
  constexpr int kTokensPerWarp = kBM / 2, kNTiles = kTokensPerWarp / 8;
  constexpr int kStages = ring_stages<kBM>();
  extern __shared__ uint4 smem_raw[];
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem_raw);  // [kStages][ring_stage_bytes]
  __nv_bfloat16* w_tile =
      reinterpret_cast<__nv_bfloat16*>(ring + kStages * ring_stage_bytes<F, kBM>());  // [kBN][kBK]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tok0 = blockIdx.x * kBM, row0 = blockIdx.y * kBN, split = blockIdx.z;
  const int num_units = p.k / kQuantUnit;
  const int total_stages = (num_units + kUnitsPerStage - 1) / kUnitsPerStage;
  const int per_split = (total_stages + splits - 1) / splits;
  const int s_begin = split * per_split, s_end = min(total_stages, s_begin + per_split);
  const QuantLayout l = quant_layout(F, p.n, p.k);
  const RowPtrs rp = row_ptrs<F>(static_cast<const uint8_t*>(p.w), l,
                                 min(row0 + static_cast<int>(threadIdx.x) / 2, p.n - 1));

  // x is the previous kernel's output (and the weights' cp.async shares its groups): wait.
  wait_for_prior_grid();
  for (int i = 0; i < kStages - 1; ++i) {
    if (s_begin + i < s_end) {
      issue_stage<F, kBM>(p, l, row0, tok0, s_begin + i, num_units,
                          ring + i * ring_stage_bytes<F, kBM>());
    } else {
      cp_async_commit();
    }
  }

  float acc[2][kNTiles][4] = {};
  const int wf = 32 * (warp % 4), wt = kTokensPerWarp * (warp / 4);
  for (int s = s_begin; s < s_end; ++s) {
    const int i = s - s_begin;
    uint8_t* buf = ring + (i % kStages) * ring_stage_bytes<F, kBM>();
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage s has landed; everyone is done with stage s - 1's buffer
    if (s + kStages - 1 < s_end) {
      issue_stage<F, kBM>(p, l, row0, tok0, s + kStages - 1, num_units,
                          ring + ((i + kStages - 1) % kStages) * ring_stage_bytes<F, kBM>());
    } else {
      cp_async_commit();
    }
    decode_stage<F>(rp, buf, s, num_units, w_tile);
    __syncthreads();  // the weight tile is complete
    const __nv_bfloat16* xs = reinterpret_cast<const __nv_bfloat16*>(buf + kBN * raw_row_bytes<F>());
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        ldmatrix_x4(a[mt], smem_addr(w_tile + swizzle<kBK>(wf + 16 * mt + lane % 16,
                                                              kk + 8 * (lane / 16))));
      }
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        uint32_t b[4];
        const int tok = wt + 16 * np + lane % 8 + 8 * (lane / 16);
        ldmatrix_x4(b, smem_addr(xs + swizzle<kBK>(tok, kk + 8 * ((lane / 8) % 2))));
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_16816<__nv_bfloat16>(acc[mt][2 * np], a[mt], b[0], b[1]);
          mma_16816<__nv_bfloat16>(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  allow_next_grid();

  const int g = lane / 4, t = lane % 4;
  float* partial = splits > 1 ? p.partials + int64_t{split} * p.m * p.n : nullptr;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const int f = row0 + wf + 16 * mt + g + 8 * (h / 2);
        const int tok = tok0 + wt + 8 * nt + 2 * t + h % 2;
        if (f >= p.n || tok >= p.m) continue;
        if (partial != nullptr) {
          partial[int64_t{tok} * p.n + f] = acc[mt][nt][h];
        } else {
          store_output(p, f, tok, acc[mt][nt][h]);
        }
      }
    }
  }
}

// y from the splits' partial sums, added in split order.
__global__ void __launch_bounds__(256) reduce_splits_kernel(const QuantGemmParams p, int splits) {
  const int64_t i = blockIdx.x * int64_t{256} + threadIdx.x;
  wait_for_prior_grid();
  allow_next_grid();
  if (i >= int64_t{p.m} * p.n) return;
  float v = 0.f;
  for (int s = 0; s < splits; ++s) v += p.partials[s * int64_t{p.m} * p.n + i];
  store_output(p, static_cast<int>(i % p.n), static_cast<int>(i / p.n), v);
}

template <WeightFormat F, int kBM>
struct SmemTag {};

// The tiling of one call: token tile, k splits.
struct Plan {
  int bm = 64, splits = 1;
};

// The largest token tile that still gives every SM two CTAs; where even 32-token tiles
// do not, k is split so that they do (each split keeps >= 4 stages and the partial sums
// fit p.partials).
Plan plan(const QuantGemmParams& p, int num_sms) {
  const int64_t columns = (p.n + kBN - 1) / kBN;
  Plan pl;
  pl.bm = p.m > 32 ? 64 : 32;
  const int64_t ctas = columns * ((p.m + pl.bm - 1) / pl.bm);
  const int64_t want = 2 * int64_t{num_sms};
  if (ctas >= want) return pl;
  const int stages = (p.k / kQuantUnit + kUnitsPerStage - 1) / kUnitsPerStage;
  int splits = static_cast<int>(std::min<int64_t>((want + ctas - 1) / ctas, stages / 4));
  while (splits > 1 && int64_t{splits} * p.m * p.n > p.partials_floats) --splits;
  pl.splits = std::max(splits, 1);
  return pl;
}

template <WeightFormat F, int kBM>
absl::Status launch(const QuantGemmParams& p, const Plan& pl, cudaStream_t stream) {
  auto* kernel = quant_gemm_kernel<F, kBM>;
  constexpr int smem = smem_bytes<F, kBM>();
  if (absl::Status s = set_smem_limit_once<SmemTag<F, kBM>>(kernel, smem); !s.ok()) return s;
  const dim3 grid((p.m + kBM - 1) / kBM, (p.n + kBN - 1) / kBN, pl.splits);
  CUDA_CHECK(launch_dependent(kernel, grid, kThreads, smem, stream, p, pl.splits));
  if (pl.splits > 1) {
    const int64_t count = int64_t{p.m} * p.n;
    CUDA_CHECK(launch_dependent(reduce_splits_kernel, static_cast<unsigned>((count + 255) / 256),
                                256, 0, stream, p, pl.splits));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace device::quant_gemm

bool quant_gemm_supported(WeightFormat f, int k) {
  return f != WeightFormat::kBf16 && k > 0 && quant_layout_ok(f, k);
}

int64_t quant_gemm_partials_floats(int num_sms) {
  // plan() splits only grids of fewer than 2 * num_sms CTAs of kBN x 64 (or 32) outputs,
  // into at most 2 * num_sms + (CTAs - 1) < 4 * num_sms tiles.
  return 4 * int64_t{std::max(num_sms, 1)} * device::quant_gemm::kBN * 64;
}

absl::Status quant_gemm(const QuantGemmParams& p, int num_sms, cudaStream_t stream) {
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
  if (p.w == nullptr || p.x == nullptr || p.y == nullptr ||
      reinterpret_cast<uintptr_t>(p.w) % 16 != 0 || reinterpret_cast<uintptr_t>(p.x) % 16 != 0 ||
      (p.partials_floats > 0 && p.partials == nullptr)) {
    return absl::InvalidArgumentError("quant_gemm: a pointer is null or not 16-byte aligned");
  }
  const device::quant_gemm::Plan pl = device::quant_gemm::plan(p, std::max(num_sms, 1));
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    constexpr WeightFormat F = decltype(tag)::value;
    if (pl.bm == 64) return device::quant_gemm::launch<F, 64>(p, pl, stream);
    return device::quant_gemm::launch<F, 32>(p, pl, stream);
  });
}

}  // namespace flashserve::kernels
