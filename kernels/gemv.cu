// Device code and launcher of kernels/gemv.h.
//
// Layout of one CTA (256 threads, 8 warps): the m input rows, rounded up to kRows (a power
// of two, zero-filled), sit in shared memory as bf16 [kRows][k]; 16-byte chunk c of row r
// is at r * k/8 + c, so a warp reading chunks lane, lane + 32, ... is conflict-free. Each
// warp owns a pair of weight rows at a time (two adjacent outputs, or gate j and up j) and
// walks them in 16-byte loads, kUnroll chunks per lane in flight before any arithmetic:
// decode GEMVs are latency-bound, so bytes in flight, not FLOPs, set the speed.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/gemv.h"
#include "kernels/gemv_epilogue.cuh"
#include "kernels/quant/quant_gemv.h"

namespace flashserve::kernels {
namespace device {
namespace {

constexpr int kGemvThreads = 256;
constexpr int kGemvWarps = kGemvThreads / 32;
constexpr int kUnroll = 4;       // 16-byte weight chunks per lane and row in flight
constexpr int kCtasPerSm = 2;    // grid cap: enough warps to cover latency, few re-stagings

int rows_bucket(int m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8; }

// acc + the dot product of 8 bf16 pairs.
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b, float acc) {
  const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 fa = __bfloat1622float2(a2[i]), fb = __bfloat1622float2(b2[i]);
    acc = fmaf(fa.x, fb.x, acc);
    acc = fmaf(fa.y, fb.y, acc);
  }
  return acc;
}

// Asks L2 for the weight rows of the pairs [pair0, pair0 + kGemvWarps) (the CTA's pairs in
// the first pass of the loop below): one contiguous range of rows, two for kSwiglu (gate
// and up). The weights are written by no kernel of a step, so this may run before
// wait_for_prior_grid(): the CTA's rows stream from HBM into L2 while the previous kernel
// still runs, and the loads after the wait hit L2. A hint: the bulk prefetch (sm_90, TMA)
// returns at once and the loads stay correct without it.
//
// It pays only where a GEMV is latency-bound, i.e. its weights are small (SmolLM2's layers,
// 0.7-3.5 MB per GEMV); where the previous kernel is itself streaming weights at full
// bandwidth (the 1B shape's 8-67 MB) it costs, and so did a prefetch one pass ahead inside
// the loop. Hence the cap below and no in-loop prefetch (measured: bench/serving/NOTES.md,
// step 7).
constexpr int64_t kPrefetchMaxWeightBytes = int64_t{8} << 20;

__device__ __forceinline__ int64_t weight_bytes(const GemvParams& p) {
  const int64_t rows = p.output == GemvOutput::kSwiglu ? 2 * int64_t{p.n} : p.n;
  return rows * p.k * 2;
}
__device__ __forceinline__ void prefetch_l2(const void* ptr, int64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (bytes > 0) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr),
                 "r"(static_cast<uint32_t>(bytes))
                 : "memory");
  }
#endif
}

__device__ __forceinline__ void prefetch_pairs(const GemvParams& p, int pair0, int num_pairs) {
  if (pair0 >= num_pairs) return;
  const int pair1 = min(pair0 + kGemvWarps, num_pairs);
  const int64_t row_bytes = static_cast<int64_t>(p.k) * 2;  // a multiple of 16: k % 8 == 0
  const char* w = static_cast<const char*>(p.w);
  if (p.output == GemvOutput::kSwiglu) {
    prefetch_l2(w + pair0 * row_bytes, (pair1 - pair0) * row_bytes);
    prefetch_l2(w + (p.n + pair0) * row_bytes, (pair1 - pair0) * row_bytes);
  } else {
    const int row1 = min(2 * pair1, p.n);
    prefetch_l2(w + 2 * pair0 * row_bytes, (row1 - 2 * pair0) * row_bytes);
  }
}

// Stages the input rows into shared memory as bf16 (rows >= m are zero).
template <int kRows>
__device__ void stage_rows(const GemvParams& p, __nv_bfloat16* xs) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (p.input == GemvInput::kRmsNorm) {
    // One warp per row, as kernels::rmsnorm: scale = 1 / sqrt(mean(x^2) + eps) rounded to
    // float once, then (x * scale) * weight rounded to bf16.
    for (int r = warp; r < kRows; r += kGemvWarps) {
      __nv_bfloat16* dst = xs + static_cast<int64_t>(r) * p.k;
      if (r >= p.m) {
        for (int i = lane; i < p.k; i += 32) dst[i] = __float2bfloat16(0.f);
        continue;
      }
      const int64_t row = p.rows != nullptr ? p.rows[r] : r;
      const float* x = static_cast<const float*>(p.x) + row * p.k;
      const float scale = rms_scale(x, p.k, p.eps, lane);
      for (int i = lane; i < p.k; i += 32) dst[i] = __float2bfloat16(x[i] * scale * p.norm_weight[i]);
    }
  } else {
    const int chunks = p.k / 8;
    uint4* dst = reinterpret_cast<uint4*>(xs);
    const uint4* src = static_cast<const uint4*>(p.x);
    for (int c = threadIdx.x; c < kRows * chunks; c += kGemvThreads) {
      dst[c] = c / chunks < p.m ? src[c] : make_uint4(0, 0, 0, 0);
    }
  }
  __syncthreads();
}

template <int kRows>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const GemvParams p) {
  extern __shared__ uint4 smem_raw[];
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  const int num_pairs = gemv_num_pairs(p);
  const int pass_pairs = gridDim.x * kGemvWarps;  // pairs of all CTAs in one pass
  if (threadIdx.x == 0 && weight_bytes(p) <= kPrefetchMaxWeightBytes) {
    prefetch_pairs(p, blockIdx.x * kGemvWarps, num_pairs);  // the weights only: see above
  }
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any other global access
  allow_next_grid();
  stage_rows<kRows>(p, xs);
  const uint4* xs4 = smem_raw;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int chunks = p.k / 8;
  for (int pair = blockIdx.x * kGemvWarps + warp; pair < num_pairs; pair += pass_pairs) {
    const GemvPairRows rows = gemv_pair_rows(p, pair);
    const uint4* w0 = static_cast<const uint4*>(p.w) + static_cast<int64_t>(rows.row0) * chunks;
    const uint4* w1 = static_cast<const uint4*>(p.w) + static_cast<int64_t>(rows.row1) * chunks;
    float a0[kRows] = {}, a1[kRows] = {};
    for (int c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
      uint4 u0[kUnroll], u1[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + 32 * u;
        u0[u] = c < chunks ? __ldg(w0 + c) : make_uint4(0, 0, 0, 0);
        u1[u] = c < chunks ? __ldg(w1 + c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int c = c0 + 32 * u;
        if (c >= chunks) break;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const uint4 xv = xs4[r * chunks + c];
          a0[r] = dot8(u0[u], xv, a0[r]);
          a1[r] = dot8(u1[u], xv, a1[r]);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      a0[r] = warp_sum(a0[r]);
      a1[r] = warp_sum(a1[r]);
    }
    store_pair<kRows>(p, pair, a0, a1, lane);  // kernels/gemv_epilogue.cuh
  }
}

template <int kRows>
absl::Status launch(const GemvParams& p, int num_sms, cudaStream_t stream) {
  const int smem = kRows * p.k * 2;
  auto* kernel = gemv_kernel<kRows>;
  if (absl::Status s = set_smem_limit(kernel, smem); !s.ok()) return s;
  const int num_pairs = p.output == GemvOutput::kSwiglu ? p.n : (p.n + 1) / 2;
  const int ctas = std::min((num_pairs + kGemvWarps - 1) / kGemvWarps,
                            kCtasPerSm * std::max(num_sms, 1));
  CUDA_CHECK(launch_dependent(kernel, ctas, kGemvThreads, smem, stream, p));
  return absl::OkStatus();
}

}  // namespace
}  // namespace device

bool gemv_supported(int m, int k) {
  return m >= 1 && m <= kGemvMaxRows && k > 0 && k % 8 == 0 &&
         int64_t{device::rows_bucket(m)} * k * 2 <= kGemvMaxSmemBytes;
}

bool gemv_supported(WeightFormat f, int m, int k) {
  return f == WeightFormat::kBf16 ? gemv_supported(m, k) : quant_gemv_supported(f, m, k);
}

absl::Status gemv(const GemvParams& p, int num_sms, cudaStream_t stream) {
  if (!gemv_supported(p.w_format, p.m, p.k) || p.n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemv: unsupported shape m ", p.m, ", n ", p.n, ", k ", p.k, " for ",
        weight_format_name(p.w_format), " weights (m in [1, ", kGemvMaxRows,
        "], k a multiple of 8 for bf16, of the block size for a quantized format, staged rows "
        "within shared memory)"));
  }
  const bool rope = p.output == GemvOutput::kRopeAppend;
  if (p.x == nullptr || p.w == nullptr || (p.y == nullptr && !rope) ||
      (p.input == GemvInput::kRmsNorm && p.norm_weight == nullptr)) {
    return absl::InvalidArgumentError("gemv: a required pointer is null");
  }
  if (rope) {
    const RopeAppendParams& q = p.rope;
    if (q.style != RopeStyle::kAdjacentPairs || q.head_dim < 2 || q.head_dim % 2 != 0 ||
        q.num_heads < 1 || q.num_kv_heads < 1 || q.block_size < 1 || q.num_tokens != p.m ||
        p.rope_first_col < 0 || p.rope_first_col % q.head_dim != 0 || p.n % q.head_dim != 0 ||
        p.rope_first_col + p.n > (q.num_heads + 2 * q.num_kv_heads) * q.head_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "gemv: the RoPE epilogue needs adjacent pairs, an even head_dim, num_tokens == m and "
          "columns [rope_first_col, rope_first_col + n) within (num_heads + 2 * num_kv_heads) "
          "* head_dim, on head boundaries; got head_dim ", q.head_dim, ", num_tokens ",
          q.num_tokens, ", m ", p.m, ", n ", p.n, ", rope_first_col ", p.rope_first_col));
    }
  }
  if (p.w_format != WeightFormat::kBf16) return quant_gemv(p, num_sms, stream);
  switch (device::rows_bucket(p.m)) {
    case 1: return device::launch<1>(p, num_sms, stream);
    case 2: return device::launch<2>(p, num_sms, stream);
    case 4: return device::launch<4>(p, num_sms, stream);
    default: return device::launch<8>(p, num_sms, stream);
  }
}

}  // namespace flashserve::kernels
