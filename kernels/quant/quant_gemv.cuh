#pragma once
// Device code of the quantized GEMV (kernels/quant/quant_gemv.h).
//
// One CTA of up to 512 threads per SM (16 warps; the grid is at most one CTA per SM, so the
// staging below is done once per SM, not twice as with two CTAs of 256).
//   1. Each warp loads the first kUnits units of its first pair of weight rows into
//      registers before waiting for the previous kernel (weights are written by no kernel
//      of a step; kernels/dependent_launch.cuh): those loads fly while the previous kernel
//      drains and while step 2 runs.
//   2. The m input rows (normalised first for kRmsNorm) are quantized into shared memory:
//      xq   uint4 [kRows][2][units]  int8 of elements 0-15 / 16-31 of each unit, split so
//                                    that lane i reading unit i is conflict-free;
//      rec  float2 [kRows][units]    {dx, dx * sum(xq)};
//      sxlo float [kRows][units]     dx * sum(xq[0..16)) (Q6_K's per-16 scales);
//      1.375 bytes per element in all. Rows past m are zero.
//   3. Warp w streams pairs w, w + warps * gridDim.x, ...: per pass kUnits units of both rows
//      per lane in flight (16-byte quant loads, coalesced across the warp), then per unit
//      the decode of kernels/quant/quant_unit.h and, for each input row, 8 dp4a and a few
//      fp32 operations; the x data read from shared memory serves both weight rows.
//   4. Warp reduction and the shared epilogue (kernels/gemv_epilogue.cuh).
// Shared-memory bandwidth bounds the kernel at large m: per unit and input row a lane reads
// 40 bytes (Q6_K 44) of x, scale and sums for 2 x 16 bytes of 4-bit weights, so at m = 4
// the kernel reads ~5x more from shared memory than from HBM, at m = 8 ~10x
// (bench/gemm/NOTES.md).
#include <cuda_bf16.h>

#include "kernels/dependent_launch.cuh"
#include "kernels/gemv.h"
#include "kernels/gemv_epilogue.cuh"
#include "kernels/quant/quant_layout.h"
#include "kernels/quant/quant_unit.h"

namespace flashserve::kernels::device::quant_gemv {

using kernels::quant::Unit;
using kernels::quant::UnitRaw;

constexpr int kThreads = 512;  // at most; the launcher picks 128-512 (cta_warps)
constexpr int kWarps = kThreads / 32;

// Warps per CTA: 16 where there are pairs enough for 16 warps on every SM, else fewer, so
// that the grid still covers every SM (1B's o projection, 1024 pairs: 8 warps x 128 CTAs
// rather than 16 x 64 with half the SMs idle). At least 4, to keep the per-CTA staging of
// the input rows a small part of the work.
inline int cta_warps(int num_pairs, int num_sms) {
  const int per_sm = (num_pairs + num_sms - 1) / num_sms;
  return per_sm >= kWarps ? kWarps : per_sm <= 4 ? 4 : per_sm;
}

// Units per lane and row in flight: ~64 bytes of weights per lane and row (so ~64 KB per SM
// with 16 warps, above the ~36 KB that 4.8 TB/s x ~1 us of latency spread over 132 SMs
// needs), fewer where the registers of 8 input rows' accumulators are needed too.
// The counts keep every instantiation within 128 registers without spills (-Xptxas -v,
// nvcc 13.0, sm_80 and sm_90a): K-quants carry a 16-byte head (Q6_K: 8 more bytes of high
// bits) per unit and row, and at m = 8 the 16 accumulators besides.
template <WeightFormat F, int kRows>
__device__ constexpr int units_in_flight() {
  constexpr bool k_quant = F == WeightFormat::kQ4_K || F == WeightFormat::kQ5_K ||
                           F == WeightFormat::kQ6_K;
  if (F == WeightFormat::kQ8_0) return 2;
  if (k_quant && kRows >= 8) return 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  if (k_quant) return 2;  // sm_80's register allocation spills Q4_K / Q5_K at 4
#endif
  if (k_quant && kRows >= 4) return 2;
  return kRows >= 8 ? 2 : 4;
}

inline int staged_smem_bytes(int rows_bucket, int k) {
  return rows_bucket * (k / kQuantUnit) * (32 + 8 + 4) + 4 * kGemvMaxRows;
}

// 16 bytes streamed once: not kept in L1. Volatile so that the compiler keeps the first
// pass's loads before griddepcontrol.wait (step 1) rather than sinking them to their use.
__device__ __forceinline__ uint4 load_stream16(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Start of each array's row for one weight row.
struct RowPtrs {
  const uint8_t* qs;
  const uint8_t* qh;
  const uint8_t* scale;
  const uint8_t* d;
};
template <WeightFormat F>
__device__ __forceinline__ RowPtrs row_ptrs(const uint8_t* base, const QuantLayout& l, int row) {
  const quant::UnitOffsets o = quant::unit_offsets(F, l, row, 0);
  return {base + o.qs, base + o.qh, base + o.scale, base + o.d};
}

// The scale words of unit u (UnitRaw::sc; Q6_K: sc[1] its d) from global memory.
template <WeightFormat F>
__device__ __forceinline__ void load_unit_scales(const RowPtrs& r, int u, UnitRaw& raw) {
  if constexpr (F == WeightFormat::kQ6_K) {
    raw.sc[1] = __ldg(reinterpret_cast<const uint16_t*>(r.d) + u / 8);
  }
  if constexpr (F == WeightFormat::kQ4_K || F == WeightFormat::kQ5_K) {
    const uint4 head = __ldg(reinterpret_cast<const uint4*>(r.scale) + u / 8);  // 8 lanes share
    raw.sc[0] = head.x, raw.sc[1] = head.y, raw.sc[2] = head.z, raw.sc[3] = head.w;
  } else if constexpr (F == WeightFormat::kQ4_1) {
    raw.sc[0] = __ldg(reinterpret_cast<const uint32_t*>(r.scale) + u);
  } else {
    raw.sc[0] = __ldg(reinterpret_cast<const uint16_t*>(r.scale) + u);
  }
}

template <WeightFormat F>
__device__ __forceinline__ void load_unit(const RowPtrs& r, const QuantLayout& l, int u,
                                          UnitRaw& raw) {
  const uint4 q = load_stream16(r.qs + 16 * u);
  raw.qs[0] = q.x, raw.qs[1] = q.y, raw.qs[2] = q.z, raw.qs[3] = q.w;
  if constexpr (F == WeightFormat::kQ8_0) {
    const uint4 h = load_stream16(r.qs + l.qs_row_bytes / 2 + 16 * u);
    raw.qs[4] = h.x, raw.qs[5] = h.y, raw.qs[6] = h.z, raw.qs[7] = h.w;
  }
  if constexpr (F == WeightFormat::kQ5_K) {
    raw.qh[0] = __ldg(reinterpret_cast<const uint32_t*>(r.qh) + u);
  }
  if constexpr (F == WeightFormat::kQ6_K) {
    const uint2 h = __ldg(reinterpret_cast<const uint2*>(r.qh) + u);
    raw.qh[0] = h.x, raw.qh[1] = h.y;
  }
  load_unit_scales<F>(r, u, raw);
}

// 8 consecutive bf16 of a 16-byte word widened to v[0..8), and back (round to nearest even).
__device__ __forceinline__ void widen_bf16x8(const uint4& w, float* v) {
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&w);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(b[j]);
    v[2 * j] = f.x;
    v[2 * j + 1] = f.y;
  }
}
__device__ __forceinline__ uint4 narrow_bf16x8(const float* v) {
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * j], v[2 * j + 1]);
    w[j] = *reinterpret_cast<const uint32_t*>(&b);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// v[0..32) = the 32 bf16 values at x (16-byte aligned), with four 16-byte loads.
__device__ __forceinline__ void load_bf16_unit(const __nv_bfloat16* x, float* v) {
  const uint4* w = reinterpret_cast<const uint4*>(x);
#pragma unroll
  for (int i = 0; i < 4; ++i) widen_bf16x8(w[i], v + 8 * i);
}

// The 32 input values of unit u of staged row r (r < m), normalised for kRmsNorm.
__device__ __forceinline__ void input_unit(const GemvParams& p, int r, int u,
                                           const float* scales, float* v) {
  if (p.input == GemvInput::kRmsNorm) {
    const int64_t row = p.rows != nullptr ? p.rows[r] : r;
    const float4* x = reinterpret_cast<const float4*>(static_cast<const float*>(p.x) + row * p.k) + 8 * u;
    const float4* g = reinterpret_cast<const float4*>(p.norm_weight) + 8 * u;
    const float scale = scales[r];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 a = x[i], b = g[i];
      // (x * scale) * weight rounded to bf16, as kernels::rmsnorm and stage_rows of gemv.cu
      v[4 * i + 0] = __bfloat162float(__float2bfloat16(a.x * scale * b.x));
      v[4 * i + 1] = __bfloat162float(__float2bfloat16(a.y * scale * b.y));
      v[4 * i + 2] = __bfloat162float(__float2bfloat16(a.z * scale * b.z));
      v[4 * i + 3] = __bfloat162float(__float2bfloat16(a.w * scale * b.w));
    }
  } else {
    load_bf16_unit(static_cast<const __nv_bfloat16*>(p.x) + static_cast<int64_t>(r) * p.k +
                       int64_t{u} * kQuantUnit,
                   v);
  }
}

template <int kRows>
__device__ void stage_rows_q8(const GemvParams& p, uint4* xq, float2* rec, float* sxlo,
                              float* scales) {
  const int units = p.k / kQuantUnit;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (p.input == GemvInput::kRmsNorm) {
    for (int r = warp; r < p.m; r += blockDim.x / 32) {
      const int64_t row = p.rows != nullptr ? p.rows[r] : r;
      const float s = rms_scale(static_cast<const float*>(p.x) + row * p.k, p.k, p.eps, lane);
      if (lane == 0) scales[r] = s;
    }
    __syncthreads();
  }
  for (int item = threadIdx.x; item < kRows * units; item += blockDim.x) {
    const int r = item / units, u = item % units;
    uint32_t words[8] = {};
    int sum = 0, sum_lo = 0;
    float dx = 0.f;
    if (r < p.m) {
      float v[kQuantUnit];
      input_unit(p, r, u, scales, v);
      quant::quantize_unit(v, words, &sum, &sum_lo, &dx);
    }
    xq[(2 * r) * units + u] = make_uint4(words[0], words[1], words[2], words[3]);
    xq[(2 * r + 1) * units + u] = make_uint4(words[4], words[5], words[6], words[7]);
    rec[r * units + u] = make_float2(dx, dx * static_cast<float>(sum));
    sxlo[r * units + u] = dx * static_cast<float>(sum_lo);
  }
  __syncthreads();
}

template <WeightFormat F, int kRows>
__global__ void __launch_bounds__(kThreads, 1) quant_gemv_kernel(const GemvParams p) {
  constexpr int kUnits = units_in_flight<F, kRows>();
  extern __shared__ uint4 smem[];
  const int units = p.k / kQuantUnit;
  uint4* xq = smem;
  float2* rec = reinterpret_cast<float2*>(xq + 2 * kRows * units);
  float* sxlo = reinterpret_cast<float*>(rec + kRows * units);
  float* scales = sxlo + kRows * units;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int num_pairs = gemv_num_pairs(p);
  const int w_rows = p.output == GemvOutput::kSwiglu ? 2 * p.n : p.n;
  const QuantLayout l = quant_layout(F, w_rows, p.k);
  const uint8_t* base = static_cast<const uint8_t*>(p.w);

  const int warps = blockDim.x / 32;
  int pair = blockIdx.x * warps + warp;
  UnitRaw raw[2][kUnits];
  bool loaded = false;  // raw holds the first pass of `pair` (step 1)
  if (pair < num_pairs) {
    const GemvPairRows rows = gemv_pair_rows(p, pair);
    const RowPtrs r0 = row_ptrs<F>(base, l, rows.row0), r1 = row_ptrs<F>(base, l, rows.row1);
#pragma unroll
    for (int i = 0; i < kUnits; ++i) {
      const int u = lane + 32 * i;
      if (u < units) {
        load_unit<F>(r0, l, u, raw[0][i]);
        load_unit<F>(r1, l, u, raw[1][i]);
      }
    }
    loaded = true;
  }
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any other global access
  allow_next_grid();
  stage_rows_q8<kRows>(p, xq, rec, sxlo, scales);

  for (; pair < num_pairs; pair += gridDim.x * warps) {
    const GemvPairRows rows = gemv_pair_rows(p, pair);
    const RowPtrs r0 = row_ptrs<F>(base, l, rows.row0), r1 = row_ptrs<F>(base, l, rows.row1);
    float a0[kRows] = {}, a1[kRows] = {};
    for (int u0 = lane; u0 < units; u0 += 32 * kUnits) {
      if (!loaded) {
#pragma unroll
        for (int i = 0; i < kUnits; ++i) {
          const int u = u0 + 32 * i;
          if (u < units) {
            load_unit<F>(r0, l, u, raw[0][i]);
            load_unit<F>(r1, l, u, raw[1][i]);
          }
        }
      }
      loaded = false;
#pragma unroll
      for (int i = 0; i < kUnits; ++i) {
        const int u = u0 + 32 * i;
        if (u >= units) break;
        const Unit w0 = quant::decode_unit<F>(raw[0][i], u);
        const Unit w1 = quant::decode_unit<F>(raw[1][i], u);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r >= p.m) break;  // warp-uniform; rows past m are zero anyway
          const uint4 lo = xq[(2 * r) * units + u], hi = xq[(2 * r + 1) * units + u];
          const uint32_t xl[4] = {lo.x, lo.y, lo.z, lo.w}, xh[4] = {hi.x, hi.y, hi.z, hi.w};
          const float2 rc = rec[r * units + u];
          const float sl = F == WeightFormat::kQ6_K ? sxlo[r * units + u] : 0.f;
          a0[r] = quant::unit_dot<F>(w0, xl, xh, rc.x, rc.y, sl, a0[r]);
          a1[r] = quant::unit_dot<F>(w1, xl, xh, rc.x, rc.y, sl, a1[r]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      a0[r] = warp_sum(a0[r]);
      a1[r] = warp_sum(a1[r]);
    }
    store_pair<kRows>(p, pair, a0, a1, lane);
  }
}

}  // namespace flashserve::kernels::device::quant_gemv
