// quant_gemm() of kernels/quant/quant_gemm.h.
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
constexpr int kWarps = kThreads / 32;
constexpr int kBN = 256;                          // weight rows per CTA: one per thread
constexpr int kRowsPerWarp = kBN / kWarps;        // 32: two m16 tiles
constexpr int kUnitsPerStage = 2;
constexpr int kBK = kUnitsPerStage * kQuantUnit;  // 64 elements of k per stage

// One row of a ring stage: qs (16 bytes a unit; Q8_0 32: its two halves, all first halves
// then all second halves), qh (Q5_K 4, Q6_K 8 bytes a unit), then the decoded scales (two
// floats a unit), padded to an odd number of 16-byte chunks so that the 8 rows a warp's
// lanes g = 0..7 read fall in 8 different bank groups.
template <WeightFormat F>
__host__ __device__ constexpr int qs_bytes() { return (F == WeightFormat::kQ8_0 ? 32 : 16) * kUnitsPerStage; }
template <WeightFormat F>
__host__ __device__ constexpr int qh_bytes() {
  return F == WeightFormat::kQ5_K ? 4 * kUnitsPerStage : F == WeightFormat::kQ6_K ? 8 * kUnitsPerStage : 0;
}
template <WeightFormat F>
__host__ __device__ constexpr int scale_at() { return (qs_bytes<F>() + qh_bytes<F>() + 15) / 16 * 16; }
template <WeightFormat F>
__host__ __device__ constexpr int row_stride() {
  const int chunks = (scale_at<F>() + 8 * kUnitsPerStage + 15) / 16;
  return 16 * (chunks % 2 == 1 ? chunks : chunks + 1);
}
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

// The scale words of row `row`, units u, u + 1 (zeros past the row's end), as loaded.
struct ScaleWords {
  UnitRaw raw[kUnitsPerStage];
};
template <WeightFormat F>
__device__ __forceinline__ void load_scales(const RowPtrs& rp, int u, int num_units, ScaleWords& s) {
#pragma unroll
  for (int i = 0; i < kUnitsPerStage; ++i) {
    s.raw[i].sc[0] = s.raw[i].sc[1] = s.raw[i].sc[2] = s.raw[i].sc[3] = 0;
    if (u + i < num_units) load_unit_scales<F>(rp, u + i, s.raw[i]);
  }
}
// Stores them decoded, per unit two words: Q8_0 the floats {d, 0}; the others bf16 pairs
// {bf16(a) x 2, bf16(c) x 2} (Q6_K: {a_lo x 2, a_hi x 2}) of the element formula (see
// decode_pair).
template <WeightFormat F>
__device__ __forceinline__ void store_scales(const ScaleWords& s, int u, uint8_t* row) {
  uint32_t v[2 * kUnitsPerStage];
#pragma unroll
  for (int i = 0; i < kUnitsPerStage; ++i) {
    const Unit w = quant::decode_unit<F>(s.raw[i], u + i);
    const float second = F == WeightFormat::kQ6_K ? w.a_hi : w.c;
    if constexpr (F == WeightFormat::kQ8_0) {
      v[2 * i] = __float_as_uint(w.a_lo);
      v[2 * i + 1] = 0;
    } else {
      const __nv_bfloat162 a = __float2bfloat162_rn(w.a_lo), c = __float2bfloat162_rn(second);
      v[2 * i] = *reinterpret_cast<const uint32_t*>(&a);
      v[2 * i + 1] = *reinterpret_cast<const uint32_t*>(&c);
    }
  }
  *reinterpret_cast<uint4*>(row + scale_at<F>()) = make_uint4(v[0], v[1], v[2], v[3]);
}

// Issues the cp.async part of stage `stage` into `buf`: the quant bytes of the CTA's rows
// and the x rows of its tokens; units past the row's end and tokens past m are zero-filled.
// Commits one group.
template <WeightFormat F, int kBM>
__device__ __forceinline__ void issue_stage(const QuantGemmParams& p, const QuantLayout& l,
                                            int row0, int tok0, int stage, int num_units,
                                            uint8_t* buf) {
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const int u_begin = stage * kUnitsPerStage;
  // qs: 16-byte chunks, c < kUnitsPerStage unit c (Q8_0: then the second halves).
  constexpr int kQsChunks = qs_bytes<F>() / 16;
#pragma unroll
  for (int i = threadIdx.x; i < kBN * kQsChunks; i += kThreads) {
    const int r = i / kQsChunks, c = i % kQsChunks;
    const int u = u_begin + c % kUnitsPerStage;
    const bool valid = u < num_units;
    const uint8_t* src = w + l.qs_offset + int64_t{min(row0 + r, p.n - 1)} * l.qs_row_bytes +
                         16 * u + (c >= kUnitsPerStage ? l.qs_row_bytes / 2 : 0);
    cp_async_16(smem_addr(buf + r * row_stride<F>() + 16 * c), valid ? src : w, valid);
  }
  if constexpr (qh_bytes<F>() > 0) {  // one 8- (Q5_K) or 16-byte (Q6_K) copy a row
    const int r = threadIdx.x;
    const bool valid = u_begin < num_units;  // K-quant rows are whole 256-element blocks
    const uint8_t* src = w + l.qh_offset + int64_t{min(row0 + r, p.n - 1)} * l.qh_row_bytes +
                         (qh_bytes<F>() / kUnitsPerStage) * u_begin;
    const uint32_t dst = smem_addr(buf + r * row_stride<F>() + qs_bytes<F>());
    if constexpr (qh_bytes<F>() == 16) {
      cp_async_16(dst, valid ? src : w, valid);
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst),
                   "l"(valid ? src : w), "r"(valid ? 8 : 0));
    }
  }
  __nv_bfloat16* x_tile = reinterpret_cast<__nv_bfloat16*>(buf + kBN * row_stride<F>());
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

// Two adjacent elements of an A fragment, from bytes p, p + 1 of the lane's quants q and
// the unit's two scale words s (store_scales), as a bf16 pair.
//   Q8_0: ggml's value (d q in fp32) rounded to bf16.
//   Others: the bytes (< 64) become bf16 128 + q exactly with one byte permute (0x43 is the
//   high byte of bf16 128, whose ulp is 1), one subtraction leaves q less the format's offset
//   exactly, and one bf16x2 FMA (or multiply) rounds q bf16(a) + bf16(c) once: 1.5
//   instructions an element where ggml's fp32 operations take ~6. Against ggml's value
//   rounded to bf16 this adds the rounding of a and c to bf16 (each < 2^-9 relative; with
//   |q| <= 63, under a twentieth of a quantization step): small beside the int8 rounding of
//   the activations (kernels/cpu/quant.h dequantize_gemm_cpu is the exact reference).
template <WeightFormat F>
__device__ __forceinline__ uint32_t decode_pair(uint32_t q, int p, uint2 s, int h) {
  if constexpr (F == WeightFormat::kQ8_0) {
    const float d = __uint_as_float(s.x);
    const __nv_bfloat162 b = __floats2bfloat162_rn(
        quant::fmul_rn(quant::small_int_to_float(static_cast<int8_t>(q >> (8 * p))), d),
        quant::fmul_rn(quant::small_int_to_float(static_cast<int8_t>(q >> (8 * p + 8))), d));
    return *reinterpret_cast<const uint32_t*>(&b);
  } else {
    constexpr uint32_t kOffset = F == WeightFormat::kQ4_0 ? 0x43084308u    // 136: q - 8
                                 : F == WeightFormat::kQ6_K ? 0x43204320u  // 160: q - 32
                                                            : 0x43004300u;  // 128: q
    const uint32_t m = __byte_perm(q, 0x43434343u, (p | 4 << 4 | (p + 1) << 8 | 4 << 12));
    const __nv_bfloat162 qv = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&m),
                                      *reinterpret_cast<const __nv_bfloat162*>(&kOffset));
    const uint32_t a_bits = F == WeightFormat::kQ6_K && h == 1 ? s.y : s.x;
    const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(&a_bits);
    __nv_bfloat162 w;
    if constexpr (F == WeightFormat::kQ4_0 || F == WeightFormat::kQ6_K) {
      w = __hmul2(qv, a);
    } else {
      w = __hfma2(qv, a, *reinterpret_cast<const __nv_bfloat162*>(&s.y));
    }
    return *reinterpret_cast<const uint32_t*>(&w);
  }
}

// The quants of elements 16 h + {2t, 2t + 1, 2t + 8, 2t + 9} of one row's unit j in the
// stage, as four bytes (the lane's share of an A fragment for the unit's k16 step h).
template <WeightFormat F>
__device__ __forceinline__ uint32_t lane_quants(const uint8_t* row, int j, int h, int t) {
  const uint8_t* qs = row + 16 * j + (F == WeightFormat::kQ8_0 ? 16 * kUnitsPerStage * h : 0);
  uint32_t v = *reinterpret_cast<const uint16_t*>(qs + 2 * t) |
               uint32_t{*reinterpret_cast<const uint16_t*>(qs + 2 * t + 8)} << 16;
  if constexpr (F == WeightFormat::kQ8_0) return v;
  v = (v >> (4 * h)) & 0x0f0f0f0fu;
  const int e0 = 16 * h + 2 * t;  // the elements: e0, e0 + 1, e0 + 8, e0 + 9
  if constexpr (F == WeightFormat::kQ5_K) {  // bit 4 of element e: bit e / 4 of byte e % 4
    const uint32_t qh = *reinterpret_cast<const uint32_t*>(row + qs_bytes<F>() + 4 * j);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = e0 + (i & 1) + 8 * (i >> 1);
      v |= ((qh >> (8 * (e % 4) + e / 4)) & 1u) << (8 * i + 4);
    }
  }
  if constexpr (F == WeightFormat::kQ6_K) {  // bits 4-5 of element 16 h + l: word h, byte l % 4, bits 2 (l / 4)
    const uint32_t qh = *reinterpret_cast<const uint32_t*>(row + qs_bytes<F>() + 8 * j + 4 * h);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int l = 2 * t + (i & 1) + 8 * (i >> 1);
      v |= ((qh >> (8 * (l % 4) + 2 * (l / 4))) & 3u) << (8 * i + 4);
    }
  }
  return v;
}

// The A fragment (kernels/mma_sync.cuh) of rows r and r + 8 for k16 step h of unit j.
template <WeightFormat F>
__device__ __forceinline__ void decode_fragment(const uint8_t* row_lo, const uint8_t* row_hi,
                                                int j, int h, int t, uint32_t (&a)[4]) {
  const uint2 s_lo = *reinterpret_cast<const uint2*>(row_lo + scale_at<F>() + 8 * j);
  const uint2 s_hi = *reinterpret_cast<const uint2*>(row_hi + scale_at<F>() + 8 * j);
  const uint32_t q_lo = lane_quants<F>(row_lo, j, h, t), q_hi = lane_quants<F>(row_hi, j, h, t);
  a[0] = decode_pair<F>(q_lo, 0, s_lo, h);  // (g, 2t..2t+1)
  a[1] = decode_pair<F>(q_hi, 0, s_hi, h);  // (g + 8, 2t..)
  a[2] = decode_pair<F>(q_lo, 2, s_lo, h);  // (g, 2t+8..)
  a[3] = decode_pair<F>(q_hi, 2, s_hi, h);  // (g + 8, 2t+8..)
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
    store_scales<F>(sc, (s_begin + i) * kUnitsPerStage, scale_row(i));
  }
  wait_for_prior_grid();
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < num_stages) {
      issue_stage<F, kBM>(p, l, row0, tok0, s_begin + i, num_units, slot(i));
    } else {
      cp_async_commit();
    }
  }
  if (kStages - 1 < num_stages) {
    load_scales<F>(rp, (s_begin + kStages - 1) * kUnitsPerStage, num_units, sc);
  }

  float acc[2][kNTiles][4] = {};
  const uint8_t* my_rows[2][2];  // [m16 tile][g or g + 8], set per stage
  for (int i = 0; i < num_stages; ++i) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage i has landed (its scales were stored before an earlier barrier)
    const int next = i + kStages - 1;
    if (next < num_stages) {
      issue_stage<F, kBM>(p, l, row0, tok0, s_begin + next, num_units, slot(next));
      store_scales<F>(sc, (s_begin + next) * kUnitsPerStage, scale_row(next));
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
#pragma unroll 1  // the registers go to the accumulators, not to decoded steps in advance
    for (int kk = 0; kk < kBK / 16; ++kk) {
      const int j = kk / 2, h = kk % 2;
      uint32_t a[2][4];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) decode_fragment<F>(my_rows[mt][0], my_rows[mt][1], j, h, t, a[mt]);
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

// 64-token tiles (32 for m <= 32); where they do not give every SM two CTAs, k is split so
// that they do (each split keeps >= 4 stages and the partial sums fit p.partials).
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
  constexpr int smem = smem_bytes<F, kBM>(ring_stages<F, kBM>());
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
