#pragma once
// The pieces the tensor-core GEMMs on quantized weights share (kernels/quant/quant_gemm.cu,
// mma.sync, sm_80+; kernels/quant/quant_gemm_sm90.cu, wgmma, sm_90a; kernels/quant/
// quant_gemm_narrow.cu, mma.sync on small tiles): the ring stage's row layout and the
// cp.async copies of a stage (the mma.sync kernels; the wgmma kernel copies by TMA into a
// layout of its own), the scale staging, the in-register decoding of
// mma A fragments (the same fragment for mma.sync m16n8k16 and, per warp, for wgmma m64nNk16
// with A from registers), the output rule and the split-k reduction. Device code only,
// included by those files.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/mma_sync.cuh"
#include "kernels/quant/quant_gemm.h"
#include "kernels/quant/quant_gemv.cuh"

namespace flashserve::kernels {
namespace device::quant_gemm {
// Each including .cu file gets its own copy (the kernels and the __constant__ below).
namespace {  // NOLINT(build/namespaces)

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

// The scale words of row `row`, units u, u + 1 (u even: a stage's; zeros past the row's
// end), as loaded. Q4_K and Q5_K: a stage's two units lie in one 256-element block (rows are
// whole blocks) and share its 16-byte head, loaded once (unit by unit it was two loads of the
// same 16 bytes: 4.4 % of the wgmma kernel's time on 8B gate_up at 256 tokens, bench/gemm/
// NOTES.md, twenty-fifth session). Q6_K keeps a load per unit: its four scale bytes loaded as
// one word ran 3-7 % slower at some shapes in the same measurement.
struct ScaleWords {
  UnitRaw raw[kUnitsPerStage];
};
template <WeightFormat F>
__device__ __forceinline__ void load_scales(const RowPtrs& rp, int u, int num_units, ScaleWords& s) {
  static_assert(kUnitsPerStage == 2);
#pragma unroll
  for (int i = 0; i < kUnitsPerStage; ++i) {
    s.raw[i].sc[0] = s.raw[i].sc[1] = s.raw[i].sc[2] = s.raw[i].sc[3] = 0;
  }
  if constexpr (F == WeightFormat::kQ4_K || F == WeightFormat::kQ5_K) {
    if (u < num_units) {
      load_unit_scales<F>(rp, u, s.raw[0]);
#pragma unroll
      for (int w = 0; w < 4; ++w) s.raw[1].sc[w] = s.raw[0].sc[w];
    }
  } else {
#pragma unroll
    for (int i = 0; i < kUnitsPerStage; ++i) {
      if (u + i < num_units) load_unit_scales<F>(rp, u + i, s.raw[i]);
    }
  }
}
// A decoded unit's two scale words for decode_pair: Q8_0 the floats {d, 0}; the others bf16
// pairs {bf16(a) x 2, bf16(c) x 2} (Q6_K: {a_lo x 2, a_hi x 2}) of the element formula.
template <WeightFormat F>
__device__ __forceinline__ uint2 scale_words(const Unit& w) {
  if constexpr (F == WeightFormat::kQ8_0) {
    return make_uint2(__float_as_uint(w.a_lo), 0);
  } else {
    const float second = F == WeightFormat::kQ6_K ? w.a_hi : w.c;
    const __nv_bfloat162 a = __float2bfloat162_rn(w.a_lo), c = __float2bfloat162_rn(second);
    return make_uint2(*reinterpret_cast<const uint32_t*>(&a), *reinterpret_cast<const uint32_t*>(&c));
  }
}
// Stores them decoded (scale_words), per unit two words, at `dst` (16-byte aligned: beside
// the row's quants at row + scale_at<F>(), or a ring stage's scale block).
template <WeightFormat F>
__device__ __forceinline__ void store_scales(const ScaleWords& s, int u, uint8_t* dst) {
  uint2 v[kUnitsPerStage];
#pragma unroll
  for (int i = 0; i < kUnitsPerStage; ++i) v[i] = scale_words<F>(quant::decode_unit<F>(s.raw[i], u + i));
  static_assert(kUnitsPerStage == 2);
  *reinterpret_cast<uint4*>(dst) = make_uint4(v[0].x, v[0].y, v[1].x, v[1].y);
}

// The cp.async copies of one thread, the same for every stage but for their k offset:
// built once per CTA, so that issuing a stage adds that offset to a few registers (the
// general loop, with its divisions, 64-bit row products and clamps per copy and stage, was
// a third of the kernel's instructions). Rows past n read row n - 1, units past the row's
// end and tokens past m are zero-filled. Byte offsets from the weights' base fit 32 bits
// (quant_gemm refuses tensors of 4 GiB and more). A stage buffer holds the weight rows
// (kRows x row_stride<F>()) at byte kWAt and the x tile ([kBM][kBK] bf16, swizzle<kBK>) at
// kXAt. The CTA has one thread a weight row (kRows threads).
template <WeightFormat F, int kBM, int kWAt, int kXAt, int kRows>
struct StageCopier {
  static constexpr int kQsChunks = qs_bytes<F>() / 16;          // a row and stage
  static constexpr int kQsCopies = kQsChunks;                  // a thread and stage
  static constexpr int kQsRowStep = kRows / kQsChunks;          // rows between its copies
  static constexpr int kXChunks = kBK / 8;                      // of x, a token and stage
  static constexpr int kXCopies = kBM * kXChunks / kRows;
  static constexpr int kXRowStep = kRows / kXChunks;
  static_assert(kXCopies >= 1 && kRows % kQsChunks == 0 && kRows % kXChunks == 0);

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
    qs_dst = kWAt + r * row_stride<F>() + 16 * c;
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
    issue_weights(p, stage, num_units, buf);
    issue_x(p, stage, buf);
    cp_async_commit();
  }

  // The weight rows' quant bytes (and high bits) of stage `stage` into `buf`, uncommitted.
  __device__ __forceinline__ void issue_weights(const QuantGemmParams& p, int stage,
                                                int num_units, uint8_t* buf) const {
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
      const uint32_t dst = base + kWAt + threadIdx.x * row_stride<F>() + qs_bytes<F>();
      if constexpr (qh_bytes<F>() == 16) {
        cp_async_16(dst, src, ok);
      } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src),
                     "r"(ok ? 8 : 0));
      }
    }
  }

  // The x tile of stage `stage` into `buf`, uncommitted.
  __device__ __forceinline__ void issue_x(const QuantGemmParams& p, int stage,
                                          uint8_t* buf) const {
    const bool col_ok = stage * kBK + col < p.k;
    const uint32_t x_base = smem_addr(buf) + kXAt;
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const bool ok = col_ok && (x_tokens_ok >> i & 1u);
      cp_async_16(x_base + x_dst[i], ok ? x + int64_t{i * kXRowStep} * p.k + stage * kBK : x, ok);
    }
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
// From the row's parts wherever a stage keeps them: unit j's 16 quant bytes at qs_unit (Q8_0:
// its second half qs_half_stride bytes on), the row's high-bit words at qh_row (4 or 8 bytes
// a unit) and its scale words at scale_row (8 bytes a unit).
template <WeightFormat F>
__device__ __forceinline__ RowUnit<F> load_row_unit_parts(const uint8_t* qs_unit,
                                                          int qs_half_stride,
                                                          const uint8_t* qh_row,
                                                          const uint8_t* scale_row, int j,
                                                          int t) {
  RowUnit<F> r;
#pragma unroll
  for (int h = 0; h < (F == WeightFormat::kQ8_0 ? 2 : 1); ++h) {
    const uint8_t* qs = qs_unit + qs_half_stride * h;
    r.qs[h] = *reinterpret_cast<const uint16_t*>(qs + 2 * t) |
              uint32_t{*reinterpret_cast<const uint16_t*>(qs + 2 * t + 8)} << 16;
  }
  if constexpr (F == WeightFormat::kQ5_K) {
    r.qh[0] = *reinterpret_cast<const uint32_t*>(qh_row + 4 * j);
  } else if constexpr (F == WeightFormat::kQ6_K) {
    const uint2 v = *reinterpret_cast<const uint2*>(qh_row + 8 * j);
    r.qh[0] = v.x, r.qh[1] = v.y;
  } else {
    r.qh[0] = 0;
  }
  r.s = *reinterpret_cast<const uint2*>(scale_row + 8 * j);
  return r;
}
// From a stage row laid out as row_stride<F>() says.
template <WeightFormat F>
__device__ __forceinline__ RowUnit<F> load_row_unit(const uint8_t* row, int j, int t) {
  return load_row_unit_parts<F>(row + 16 * j, 16 * kUnitsPerStage, row + qs_bytes<F>(),
                                row + scale_at<F>(), j, t);
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

// y from the splits' partial sums, added in split order. Four consecutive outputs a thread:
// the reduction is a stream of the partials (splits x m x n fp32, mostly still in the L2
// after the GEMM wrote them), so what bounds it is the loads in flight; one 16-byte load a
// split (issued together, then added in order) instead of one 4-byte load a split and an
// element keeps four times as many bytes in flight a thread. The vector path needs n to be a
// multiple of 4 (the four are then one row's, and every split's start, a multiple of m n
// floats from p.partials, is 16-byte aligned); otherwise element by element as before, and
// the stores one by one where y is bf16 or not 16-byte aligned.
__global__ void __launch_bounds__(256) reduce_splits_kernel(const QuantGemmParams p, int splits) {
  const int64_t count = int64_t{p.m} * p.n;
  const int64_t i = (blockIdx.x * int64_t{256} + threadIdx.x) * 4;
  wait_for_prior_grid();
  allow_next_grid();
  if (i >= count) return;
  if (p.n % 4 != 0) {
    for (int64_t e = i; e < min(i + 4, count); ++e) {
      float v = 0.f;
      for (int s = 0; s < splits; ++s) v += p.partials[s * count + e];
      store_output(p, static_cast<int>(e % p.n), static_cast<int>(e / p.n), v);
    }
    return;
  }
  constexpr int kInFlight = 8;  // splits whose loads are issued before the first add
  float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s0 = 0; s0 < splits; s0 += kInFlight) {
    float4 part[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      if (s0 + j < splits) {
        part[j] = __ldcs(reinterpret_cast<const float4*>(p.partials + (s0 + j) * count + i));
      }
    }
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      if (s0 + j < splits) {
        v.x += part[j].x;
        v.y += part[j].y;
        v.z += part[j].z;
        v.w += part[j].w;
      }
    }
  }
  const int f = static_cast<int>(i % p.n), tok = static_cast<int>(i / p.n);
  const int64_t at = int64_t{tok} * p.ldy + f;
  if (p.output != GemvOutput::kBf16 && p.ldy % 4 == 0 &&
      reinterpret_cast<uintptr_t>(p.y) % 16 == 0) {
    float4* y = reinterpret_cast<float4*>(static_cast<float*>(p.y) + at);
    if (p.output == GemvOutput::kFp32Accumulate) {
      const float4 old = *y;
      v.x += old.x;
      v.y += old.y;
      v.z += old.z;
      v.w += old.w;
    }
    *y = v;
    return;
  }
  store_output(p, f, tok, v.x);
  store_output(p, f + 1, tok, v.y);
  store_output(p, f + 2, tok, v.z);
  store_output(p, f + 3, tok, v.w);
}

// The splits that `splits` parts of `stages` stages really make: the kernels give each
// split ceil(stages / splits) stages, so 4 splits of 9 stages are 3 + 3 + 3 + 0, and the
// fourth would only write zeros for the reduction to add. ceil(stages / that) splits of the
// same length leave none empty.
inline int nonempty_splits(int stages, int splits) {
  if (splits <= 1 || stages <= 1) return 1;
  const int per_split = (stages + splits - 1) / splits;
  return (stages + per_split - 1) / per_split;
}

// The number of k splits for a grid of `ctas` CTAs (tiles x token tiles) where `want` would
// fill the device: each split keeps >= 4 stages and the partial sums fit p.partials.
inline int choose_splits(const QuantGemmParams& p, int64_t ctas, int64_t want) {
  if (ctas >= want) return 1;
  const int stages = (p.k / kQuantUnit + kUnitsPerStage - 1) / kUnitsPerStage;
  int splits = static_cast<int>(std::min<int64_t>((want + ctas - 1) / ctas, stages / 4));
  while (splits > 1 && int64_t{splits} * p.m * p.n > p.partials_floats) --splits;
  return nonempty_splits(stages, splits);
}

// Launches reduce_splits_kernel where k was split and the caller did not defer it.
inline absl::Status reduce_splits(const QuantGemmParams& p, int splits, cudaStream_t stream) {
  if (splits <= 1 || p.defer_reduction) return absl::OkStatus();
  const int64_t threads = (int64_t{p.m} * p.n + 3) / 4;
  CUDA_CHECK(launch_dependent(reduce_splits_kernel, static_cast<unsigned>((threads + 255) / 256),
                              256, 0, stream, p, splits));
  return absl::OkStatus();
}

}  // namespace

// The warp-specialized wgmma kernel (kernels/quant/quant_gemm_sm90.cu) for a validated call;
// *splits_out gets its k splits.
absl::Status quant_gemm_wgmma_ws(const QuantGemmParams& p, int num_sms, cudaStream_t stream,
                                int* splits_out);

// The narrow kernel (kernels/quant/quant_gemm_narrow.cu): a tile of `rows` weight rows by
// `tokens` tokens a CTA, over the whole k.
struct NarrowTile {
  int rows = 16, tokens = 16;
};
// Whether a tile of rows x tokens over rows of k elements fits the kernel's shared memory.
bool narrow_tile_fits(int rows, int tokens, int k);
// The launcher's tile for a call of m tokens.
NarrowTile narrow_tile(int m);
// The narrow kernel for a validated call (p.row_tile / p.token_tile force the tile);
// InvalidArgument for a tile it does not take or that does not fit k.
absl::Status quant_gemm_narrow(const QuantGemmParams& p, cudaStream_t stream);

}  // namespace device::quant_gemm
}  // namespace flashserve::kernels
