// quant_gemm() with QuantGemmKernel::kNarrow (kernels/quant/quant_gemm.h): small matrices at
// small token counts, where a GEMM is a chain of latencies rather than a stream of bytes.
//
// Why a third kernel. At 64 tokens a SmolLM2-135M matrix (576-3,072 rows, k 576 or 1,536) is
// 20-90 MFLOP: the tensor pipes are idle, and what a launch costs is the time from the
// previous kernel's end to this one's last store. The other two kernels tile 128-256 rows a
// CTA, so such a matrix makes 3-24 CTAs, k is split to fill the SMs and the partial sums take
// a second pass (5.5-6 us a matrix against cuBLASLt's 3.4-4.9 on the bf16 copy;
// bench/serving/NOTES.md step 23). cuBLASLt's choice for these shapes is tiles of 64 tokens
// by 8-32 rows, 80-120 CTAs, the whole k in each.
//
// Tiling. A CTA of 8 warps computes kRows = 16 or 32 weight rows (one or two mma m16 tiles)
// by kTokens = 16, 32 or 64 tokens (n8 tiles) over the whole k; the warps split k (warp w
// takes units [w U / 8, (w + 1) U / 8) of the U units of 32) and add their sums through
// shared memory in a fixed order, so no partial sums leave the CTA and a token's result
// does not depend on the others'. The launcher takes 16 rows by 16 tokens (m <= 32) or 32
// (narrow_tile(), measured); the other tiles stay for the benchmark's sweep
// (QuantGemmParams::row_tile / token_tile).
//   1. Before griddepcontrol.wait (the PDL contract of kernels/dependent_launch.cuh allows
//      reads of the weights, which no kernel of a step writes): the CTA's rows are decoded
//      into shared memory as bf16, one (row, unit) a thread at a time, with the other
//      kernels' element rule (decode_pair: bf16_rn(q bf16(a) + bf16(c)), the values
//      kernels/cpu/quant.h dequantize_gemm_cpu gives). This runs while the previous kernel
//      still computes, so the weights' HBM latency is off the critical path.
//   2. After the wait: x straight from global memory (L2) into B fragments, no shared
//      memory and no barrier. The k order inside each unit is permuted, the same way for A
//      and B (a dot product does not care): lane (g, t) takes elements 8t .. 8t + 7 of a
//      unit — for token g one 16-byte load, for weight rows g and g + 8 one 16-byte shared
//      load each — and k16 step s of the unit uses pairs 2s and 2s + 1 of those 8:
//        A/B virtual k 2t, 2t + 1     <-> unit elements 8t + 4s, 8t + 4s + 1
//        A/B virtual k 2t + 8, 2t + 9 <-> unit elements 8t + 4s + 2, 8t + 4s + 3.
//      Per unit and n8 tile: one 16-byte load and two mma a row tile. A warp's x loads for up
//      to kChunk units are issued before their mma, so that their L2 latencies overlap.
//   3. Each warp's fp32 sums into shared memory (over the decoded slice, which is no longer
//      read), then the CTA adds the 8 warps' in warp order and applies the output rule.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "kernels/quant/quant_gemm_common.cuh"

namespace flashserve::kernels {
namespace device::quant_gemm {
namespace {

constexpr int kNarrowWarps = 8;
constexpr int kNarrowThreads = 32 * kNarrowWarps;
// What a CTA may take: 99 KB is every sm_80+ GPU's opt-in limit (sm_86/89 have no more), so
// the kernel's support does not depend on the device.
constexpr int kNarrowMaxSmem = 99 * 1024;

// Bytes between decoded rows in shared memory: 2k, plus 64 where 2k is a multiple of 128, so
// that rows g and g + 1 of a quarter-warp's 16-byte loads fall in different halves of the
// 128-byte bank line (2k is a multiple of 64: k is whole units).
__host__ __device__ constexpr int narrow_row_stride(int k) {
  return (2 * k) % 128 == 0 ? 2 * k + 64 : 2 * k;
}
// The warps' sums: [warp][token][row] fp32 with rows padded by 4 (lanes g, t of a store land
// in distinct banks: g + 8 t words apart).
__host__ __device__ constexpr int narrow_red_ld(int rows) { return rows + 4; }
__host__ __device__ constexpr int narrow_smem_bytes(int rows, int tokens, int k) {
  const int slice = rows * narrow_row_stride(k);
  const int red = kNarrowWarps * tokens * narrow_red_ld(rows) * 4;
  return slice > red ? slice : red;
}

template <WeightFormat F, int kRowTiles, int kTokTiles>
__global__ void __launch_bounds__(kNarrowThreads) quant_gemm_narrow_kernel(const QuantGemmParams p) {
  constexpr int kRows = 16 * kRowTiles, kTokens = 8 * kTokTiles;
  constexpr int kChunk = kTokTiles >= 8 ? 1 : 8 / kTokTiles;  // <= 8 x loads in flight a lane
  constexpr int kRedLd = narrow_red_ld(kRows);
  extern __shared__ uint4 smem_raw[];
  uint8_t* slice = reinterpret_cast<uint8_t*>(smem_raw);  // [kRows][stride] bf16
  const int stride = narrow_row_stride(p.k);
  const int row0 = blockIdx.x * kRows, tok0 = blockIdx.y * kTokens;
  const int num_units = p.k / kQuantUnit;

  // 1. The slice, decoded (rows past n repeat row n - 1; their outputs are not stored).
  {
    const QuantLayout l = quant_layout(F, p.n, p.k);
    const uint32_t k43 = bf16_magic();
    for (int item = threadIdx.x; item < kRows * num_units; item += kNarrowThreads) {
      const int r = item / num_units, u = item % num_units;
      const RowPtrs rp = row_ptrs<F>(static_cast<const uint8_t*>(p.w), l, min(row0 + r, p.n - 1));
      UnitRaw raw;
      quant_gemv::load_unit<F>(rp, l, u, raw);
      const Unit w = quant::decode_unit<F>(raw, u);
      const uint2 s = scale_words<F>(w);
      uint32_t v[16];  // v[j]: elements 2j, 2j + 1 (Unit::q[i] holds elements 4i .. 4i + 3)
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        v[2 * i] = decode_pair<F>(w.q[i], 0, s, i / 4, k43);
        v[2 * i + 1] = decode_pair<F>(w.q[i], 2, s, i / 4, k43);
      }
      uint4* dst = reinterpret_cast<uint4*>(slice + r * stride + 64 * u);
#pragma unroll
      for (int c = 0; c < 4; ++c) dst[c] = make_uint4(v[4 * c], v[4 * c + 1], v[4 * c + 2], v[4 * c + 3]);
    }
  }
  __syncthreads();
  wait_for_prior_grid();

  // 2. The warp's units.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int u_begin = warp * num_units / kNarrowWarps;
  const int u_end = (warp + 1) * num_units / kNarrowWarps;
  const uint4* xrow[kTokTiles];  // token 8j + g's row (tokens past m repeat m - 1), at 8t
#pragma unroll
  for (int j = 0; j < kTokTiles; ++j) {
    const int tok = min(tok0 + 8 * j + g, p.m - 1);
    xrow[j] = reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(p.x) +
                                             int64_t{tok} * p.k + 8 * t);
  }
  const uint8_t* arow = slice + g * stride + 16 * t;  // row g of the slice, at element 8t
  float acc[kRowTiles][kTokTiles][4] = {};
  for (int u0 = u_begin; u0 < u_end; u0 += kChunk) {
    uint4 b[kChunk][kTokTiles];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      if (u0 + c < u_end) {
#pragma unroll
        for (int j = 0; j < kTokTiles; ++j) b[c][j] = __ldg(xrow[j] + 4 * (u0 + c));
      }
    }
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      if (u0 + c >= u_end) break;
      uint4 a[kRowTiles][2];  // rows 16 mt + g and 16 mt + g + 8, elements 8t .. 8t + 7
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt) {
        const uint8_t* at = arow + 16 * mt * stride + 64 * (u0 + c);
        a[mt][0] = *reinterpret_cast<const uint4*>(at);
        a[mt][1] = *reinterpret_cast<const uint4*>(at + 8 * stride);
      }
#pragma unroll
      for (int s = 0; s < 2; ++s) {
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          const uint32_t frag[4] = {s == 0 ? a[mt][0].x : a[mt][0].z, s == 0 ? a[mt][1].x : a[mt][1].z,
                                    s == 0 ? a[mt][0].y : a[mt][0].w, s == 0 ? a[mt][1].y : a[mt][1].w};
#pragma unroll
          for (int j = 0; j < kTokTiles; ++j) {
            mma_16816<__nv_bfloat16>(acc[mt][j], frag, s == 0 ? b[c][j].x : b[c][j].z,
                                     s == 0 ? b[c][j].y : b[c][j].w);
          }
        }
      }
    }
  }
  allow_next_grid();

  // 3. The warps' sums, added in warp order. acc[mt][j][c] is row 16 mt + g + 8 (c / 2),
  // token 8 j + 2 t + c % 2.
  __syncthreads();  // every warp is done reading the slice
  float* red = reinterpret_cast<float*>(smem_raw);
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < kTokTiles; ++j) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = 16 * mt + g + 8 * (c / 2), tk = 8 * j + 2 * t + c % 2;
        red[(warp * kTokens + tk) * kRedLd + r] = acc[mt][j][c];
      }
    }
  }
  __syncthreads();
  for (int o = threadIdx.x; o < kRows * kTokens; o += kNarrowThreads) {
    const int r = o % kRows, tk = o / kRows;  // consecutive threads: consecutive outputs of a token
    if (row0 + r >= p.n || tok0 + tk >= p.m) continue;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kNarrowWarps; ++w) v += red[(w * kTokens + tk) * kRedLd + r];
    store_output(p, row0 + r, tok0 + tk, v);
  }
}

template <WeightFormat F, int kRowTiles, int kTokTiles>
struct NarrowSmemTag {};

template <WeightFormat F, int kRowTiles, int kTokTiles>
absl::Status launch_narrow(const QuantGemmParams& p, cudaStream_t stream) {
  auto* kernel = quant_gemm_narrow_kernel<F, kRowTiles, kTokTiles>;
  if (absl::Status s = set_smem_limit_once<NarrowSmemTag<F, kRowTiles, kTokTiles>>(kernel, kNarrowMaxSmem);
      !s.ok()) {
    return s;
  }
  constexpr int kRows = 16 * kRowTiles, kTokens = 8 * kTokTiles;
  const dim3 grid((p.n + kRows - 1) / kRows, (p.m + kTokens - 1) / kTokens);
  CUDA_CHECK(launch_dependent(kernel, grid, kNarrowThreads,
                              narrow_smem_bytes(kRows, kTokens, p.k), stream, p));
  return absl::OkStatus();
}

template <WeightFormat F, int kRowTiles>
absl::Status launch_narrow_tokens(const QuantGemmParams& p, int tokens, cudaStream_t stream) {
  if (tokens == 16) return launch_narrow<F, kRowTiles, 2>(p, stream);
  if (tokens == 32) return launch_narrow<F, kRowTiles, 4>(p, stream);
  return launch_narrow<F, kRowTiles, 8>(p, stream);
}

}  // namespace

bool narrow_tile_fits(int rows, int tokens, int k) {
  return narrow_smem_bytes(rows, tokens, k) <= kNarrowMaxSmem;
}

NarrowTile narrow_tile(int m) {
  // Measured on the H200 (bench/gemm/NOTES.md, twenty-fourth session; SmolLM2's matrices, Q4_1
  // and Q8_0, 16-128 tokens, every tile): 16 rows always (32 lost everywhere: half the CTAs,
  // each reading the same x); 16 tokens up to m = 32 (ties or wins by up to 0.3 us at 32) and
  // 32 past it (at 64 tokens 32-token tiles beat 16 on every shape, gate_up 4.4 against 7.3 us:
  // 768 CTAs of 16 x 16 were too many); 64-token tiles lost by 1.2-2.7x.
  return {16, m <= 32 ? 16 : 32};
}

absl::Status quant_gemm_narrow(const QuantGemmParams& p, cudaStream_t stream) {
  NarrowTile tile = narrow_tile(p.m);
  if (p.row_tile != 0) tile.rows = p.row_tile;
  if (p.token_tile != 0) tile.tokens = p.token_tile;
  if ((tile.rows != 16 && tile.rows != 32) ||
      (tile.tokens != 16 && tile.tokens != 32 && tile.tokens != 64)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_gemm: the narrow kernel's tile of ", tile.rows, " rows by ", tile.tokens,
        " tokens (it takes 16 or 32 rows by 16, 32 or 64 tokens)"));
  }
  if (!narrow_tile_fits(tile.rows, tile.tokens, p.k)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_gemm: k ", p.k, " is too long for the narrow kernel's tile of ", tile.rows,
        " rows by ", tile.tokens, " tokens (the decoded rows take more than ",
        kNarrowMaxSmem, " bytes of shared memory)"));
  }
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    constexpr WeightFormat F = decltype(tag)::value;
    if (tile.rows == 16) return launch_narrow_tokens<F, 1>(p, tile.tokens, stream);
    return launch_narrow_tokens<F, 2>(p, tile.tokens, stream);
  });
}

}  // namespace device::quant_gemm
}  // namespace flashserve::kernels
