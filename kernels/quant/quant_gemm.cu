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

// The cp.async copies of one thread, the same for every stage but for their k offset:
// built once per CTA, so that issuing a stage adds that offset to a few registers (the
// general loop, with its divisions, 64-bit row products and clamps per copy and stage, was
// a third of the kernel's instructions). Rows past n read row n - 1, units past the row's
// end and tokens past m are zero-filled. Byte offsets from the weights' base fit 32 bits
// (quant_gemm refuses tensors of 4 GiB and more).
template <WeightFormat F, int kBM>
struct StageCopier {
  static constexpr int kQsChunks = qs_bytes<F>() / 16;          // a row and stage
  static constexpr int kQsCopies = kBN * kQsChunks / kThreads;  // a thread and stage
  static constexpr int kQsRowStep = kThreads / kQsChunks;       // rows between its copies
  static constexpr int kXChunks = kBK / 8;                      // of x, a token and stage
  static constexpr int kXCopies = kBM * kXChunks / kThreads;
  static constexpr int kXRowStep = kThreads / kXChunks;
  static_assert(kQsCopies >= 1 && kXCopies >= 1 && kThreads % kQsChunks == 0);

  const uint8_t* qs;               // chunk c of unit 0 (Q8_0: its half), row offset 0
  uint32_t qs_row[kQsCopies];      // byte offsets of the thread's rows in qs
  uint32_t qs_dst;                 // offset in a stage buffer of the first copy
  int unit;                        // which unit of the stage the thread's chunks hold
  const uint8_t* qh;               // row threadIdx.x's high bits at unit 0
  const __nv_bfloat16* x;          // the first token's x at column `col`
  uint32_t x_dst[kXCopies];
  uint32_t x_tokens_ok;            // bit i: copy i's token is < m
  int col;

  __device__ __forceinline__ StageCopier(const QuantGemmParams& p, const QuantLayout& l,
                                         int row0, int tok0) {
    const uint8_t* w = static_cast<const uint8_t*>(p.w);
    const int c = threadIdx.x % kQsChunks, r = threadIdx.x / kQsChunks;
    unit = c % kUnitsPerStage;
    qs = w + l.qs_offset + 16 * unit + (c >= kUnitsPerStage ? l.qs_row_bytes / 2 : 0);
#pragma unroll
    for (int i = 0; i < kQsCopies; ++i) {
      qs_row[i] = static_cast<uint32_t>(min(row0 + r + i * kQsRowStep, p.n - 1)) *
                  static_cast<uint32_t>(l.qs_row_bytes);
    }
    qs_dst = r * row_stride<F>() + 16 * c;
    qh = w + l.qh_offset +
         int64_t{min(row0 + static_cast<int>(threadIdx.x), p.n - 1)} * l.qh_row_bytes;
    const int xr = threadIdx.x / kXChunks;
    col = 8 * (threadIdx.x % kXChunks);
    x = static_cast<const __nv_bfloat16*>(p.x) + int64_t{min(tok0 + xr, p.m - 1)} * p.k + col;
    x_tokens_ok = 0;
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      x_dst[i] = 2 * swizzle<kBK>(xr + i * kXRowStep, col);
      if (tok0 + xr + i * kXRowStep < p.m) x_tokens_ok |= 1u << i;
    }
  }

  // Issues stage `stage` into `buf` and commits one group.
  __device__ __forceinline__ void issue(const QuantGemmParams& p, int stage, int num_units,
                                        uint8_t* buf) const {
    const int u_begin = stage * kUnitsPerStage;
    const uint32_t base = smem_addr(buf);
    const bool unit_ok = u_begin + unit < num_units;
    const uint8_t* qs_stage = qs + 16 * u_begin;
#pragma unroll
    for (int i = 0; i < kQsCopies; ++i) {
      cp_async_16(base + qs_dst + i * kQsRowStep * row_stride<F>(),
                  unit_ok ? qs_stage + qs_row[i] : qs, unit_ok);
    }
    if constexpr (qh_bytes<F>() > 0) {  // one 8- (Q5_K) or 16-byte (Q6_K) copy a row
      const bool ok = u_begin < num_units;  // K-quant rows are whole 256-element blocks
      const uint8_t* src = ok ? qh + (qh_bytes<F>() / kUnitsPerStage) * u_begin : qh;
      const uint32_t dst = base + threadIdx.x * row_stride<F>() + qs_bytes<F>();
      if constexpr (qh_bytes<F>() == 16) {
        cp_async_16(dst, src, ok);
      } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src),
                     "r"(ok ? 8 : 0));
      }
    }
    const bool col_ok = stage * kBK + col < p.k;
    const uint32_t x_base = base + kBN * row_stride<F>();
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const bool ok = col_ok && (x_tokens_ok >> i & 1u);
      cp_async_16(x_base + x_dst[i], ok ? x + int64_t{i * kXRowStep} * p.k + stage * kBK : x, ok);
    }
    cp_async_commit();
  }
};

// Two adjacent elements of an A fragment, from bytes p, p + 1 of the lane's quants q and
// the unit's two scale words s (store_scales), as a bf16 pair.
//   Q8_0: ggml's value (d q in fp32) rounded to bf16.
//   Others: the bytes (< 64) become bf16 128 + q exactly with one byte permute (0x43 is the
//   high byte of bf16 128, whose ulp is 1), one subtraction leaves q less the format's offset
//   exactly, and one bf16x2 FMA (or multiply) rounds q bf16(a) + bf16(c) once: 1.5
//   instructions an element where ggml's fp32 operations take ~6. k43 = 0x43434343, in a
//   register the compiler cannot see through (bf16_magic()): a byte permute takes one
//   immediate, and with both constants known the compiler spent a move on the selector of
//   every permute. Against ggml's value
//   rounded to bf16 this adds the rounding of a and c to bf16 (each < 2^-9 relative; with
//   |q| <= 63, under a twentieth of a quantization step): small beside the int8 rounding of
//   the activations (kernels/cpu/quant.h dequantize_gemm_cpu is the exact reference).
template <WeightFormat F>
__device__ __forceinline__ uint32_t decode_pair(uint32_t q, int p, uint2 s, int h, uint32_t k43) {
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
    const uint32_t m = __byte_perm(q, k43, (p | 4 << 4 | (p + 1) << 8 | 4 << 12));
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

// What a lane reads of one row's unit j in the stage, once for both of the unit's k16
// steps h: the quant bytes 2t, 2t + 1, 2t + 8, 2t + 9 (low nibbles: step 0, high: step 1;
// Q8_0: step h's int8 in qs[h]), the high-bit words (Q5_K: 1, Q6_K: 2) and the two scale
// words (store_scales).
template <WeightFormat F>
struct RowUnit {
  uint32_t qs[F == WeightFormat::kQ8_0 ? 2 : 1];
  uint32_t qh[F == WeightFormat::kQ6_K ? 2 : 1];
  uint2 s;
};
template <WeightFormat F>
__device__ __forceinline__ RowUnit<F> load_row_unit(const uint8_t* row, int j, int t) {
  RowUnit<F> r;
#pragma unroll
  for (int h = 0; h < (F == WeightFormat::kQ8_0 ? 2 : 1); ++h) {
    const uint8_t* qs = row + 16 * j + 16 * kUnitsPerStage * h;
    r.qs[h] = *reinterpret_cast<const uint16_t*>(qs + 2 * t) |
              uint32_t{*reinterpret_cast<const uint16_t*>(qs + 2 * t + 8)} << 16;
  }
  if constexpr (F == WeightFormat::kQ5_K) {
    r.qh[0] = *reinterpret_cast<const uint32_t*>(row + qs_bytes<F>() + 4 * j);
  } else if constexpr (F == WeightFormat::kQ6_K) {
    const uint2 v = *reinterpret_cast<const uint2*>(row + qs_bytes<F>() + 8 * j);
    r.qh[0] = v.x, r.qh[1] = v.y;
  } else {
    r.qh[0] = 0;
  }
  r.s = *reinterpret_cast<const uint2*>(row + scale_at<F>() + 8 * j);
  return r;
}

// The quants of elements 16 h + {2t, 2t + 1, 2t + 8, 2t + 9} of the unit as four bytes
// (the lane's share of an A fragment for the unit's k16 step h).
template <WeightFormat F>
__device__ __forceinline__ uint32_t lane_quants(const RowUnit<F>& r, int h, int t) {
  if constexpr (F == WeightFormat::kQ8_0) return r.qs[h];
  uint32_t v = (r.qs[0] >> (4 * h)) & 0x0f0f0f0fu;
  // The high bits of the elements 16 h + {2t, 2t + 1, 2t + 8, 2t + 9} go to bit 4 (Q5_K;
  // bits 4-5, Q6_K) of bytes 0-3. Those of 2t and 2t + 1 lie in bytes 2t % 4 and 2t % 4 + 1
  // of the high-bit word (kernels/quant/quant_layout.h), those of 2t + 8 and 2t + 9 two
  // bit positions (Q6_K: bit pairs) above them: one shift brings the four to the bottom
  // of bytes 0 and 1, two masked shifts put them in place.
  if constexpr (F == WeightFormat::kQ5_K) {  // bit 4 of element e: bit e / 4 of byte e % 4
    const uint32_t z = r.qh[0] >> (8 * (2 * t % 4) + 4 * h + t / 2);
    v |= ((z << 4) & 0x00001010u) | ((z << 18) & 0x10100000u);
  }
  if constexpr (F == WeightFormat::kQ6_K) {  // bits 4-5 of element 16 h + l: word h, byte l % 4, bits 2 (l / 4)
    const uint32_t z = r.qh[h] >> (8 * (2 * t % 4) + 2 * (t / 2));
    v |= ((z << 4) & 0x00003030u) | ((z << 16) & 0x30300000u);
  }
  return v;
}

// 0x43434343 (decode_pair), as a value the compiler does not know: read once into a
// register.
__constant__ uint32_t kBf16Magic = 0x43434343u;
__device__ __forceinline__ uint32_t bf16_magic() { return kBf16Magic; }

// The A fragment (kernels/mma_sync.cuh) of rows r and r + 8 (lo, hi) for k16 step h.
template <WeightFormat F>
__device__ __forceinline__ void decode_fragment(const RowUnit<F>& lo, const RowUnit<F>& hi,
                                                int h, int t, uint32_t k43, uint32_t (&a)[4]) {
  const uint32_t q_lo = lane_quants<F>(lo, h, t), q_hi = lane_quants<F>(hi, h, t);
  a[0] = decode_pair<F>(q_lo, 0, lo.s, h, k43);  // (g, 2t..2t+1)
  a[1] = decode_pair<F>(q_hi, 0, hi.s, h, k43);  // (g + 8, 2t..)
  a[2] = decode_pair<F>(q_lo, 2, lo.s, h, k43);  // (g, 2t+8..)
  a[3] = decode_pair<F>(q_hi, 2, hi.s, h, k43);  // (g + 8, 2t+8..)
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
  const StageCopier<F, kBM> copier(p, l, row0, tok0);
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
  const device::quant_gemm::Plan pl = device::quant_gemm::plan(p, std::max(num_sms, 1));
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    constexpr WeightFormat F = decltype(tag)::value;
    if (pl.bm == 64) return device::quant_gemm::launch<F, 64>(p, pl, stream);
    return device::quant_gemm::launch<F, 32>(p, pl, stream);
  });
}

}  // namespace flashserve::kernels
