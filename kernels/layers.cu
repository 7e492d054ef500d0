// Device code and launchers of kernels/layers.h. These kernels are memory-bound one-pass
// loops (a few bytes moved per FLOP); each thread handles elements strided by the block so
// that a warp's loads and stores are contiguous.
#include <cub/block/block_reduce.cuh>

#include <type_traits>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/layers.h"
#include "kernels/paged_kv.h"
#include "kernels/quant/quant_gemv.cuh"
#include "kernels/quant/quant_round.cuh"

namespace flashserve::kernels {
namespace device {
namespace {

constexpr int kNormThreads = 256;       // one block per row: dim 576..8192 -> 3..32 per thread
constexpr int kElementwiseThreads = 256;
// Grid-stride loops stop adding blocks here: ~4 waves of 256-thread blocks on 132 SMs.
constexpr int64_t kMaxGridStrideBlocks = 4096;

template <typename T>
__device__ __forceinline__ float load(const T* p, int64_t i) {
  return DTypeTraits<T>::to_float(p[i]);
}
template <typename T>
__device__ __forceinline__ void store(T* p, int64_t i, float v) {
  p[i] = DTypeTraits<T>::from_float(v);
}

template <typename T>
__global__ void embedding_kernel(EmbeddingParams p) {
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any global access
  allow_next_grid();
  const int64_t t = blockIdx.x;
  const T* row = static_cast<const T*>(p.table) + static_cast<int64_t>(p.token_ids[t]) * p.dim;
  for (int i = threadIdx.x; i < p.dim; i += blockDim.x) p.out[t * p.dim + i] = load(row, i);
}

// v[i] (i < kVecs) = the sum over s = 0 .. splits - 1, in that order, of the four floats at
// part + s * split_stride + i * vec_stride (16-byte aligned), from 0.f: reduce_splits_kernel's
// rule (kernels/quant/quant_gemm_common.cuh), so the same bits; v[i] at or past `valid` is
// left 0 and not read. A fold reads splits times the bytes of what it produces, mostly from
// the L2, so what bounds it is the loads in flight: 8 splits' loads of all kVecs float4s
// are issued before the first add.
template <int kVecs>
__device__ __forceinline__ void sum_partials(const float* part, int64_t split_stride, int splits,
                                             int64_t vec_stride, int valid, float4 (&v)[kVecs]) {
  constexpr int kInFlight = 8;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) v[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int s0 = 0; s0 < splits; s0 += kInFlight) {
    float4 q[kInFlight][kVecs];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        if (s0 + j < splits && i < valid) {
          q[j][i] = __ldcs(reinterpret_cast<const float4*>(part + (s0 + j) * split_stride +
                                                           i * vec_stride));
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        if (s0 + j < splits && i < valid) {
          v[i].x += q[j][i].x;
          v[i].y += q[j][i].y;
          v[i].z += q[j][i].z;
          v[i].w += q[j][i].w;
        }
      }
    }
  }
}

// The same sum for one float at `part` (rows not 16-byte aligned: odd dims).
__device__ __forceinline__ float sum_partials_scalar(const float* part, int64_t split_stride,
                                                     int splits) {
  float v = 0.f;
  for (int s = 0; s < splits; ++s) v += __ldcs(part + s * split_stride);
  return v;
}

// Adds RmsNormParams::partials into row r of x (row pointer x) and stores it back:
// x = x + the split sum, the reduction kernel's order of operands. Where rows are 16-byte
// aligned, chunk c of 4 floats by thread c % kNormThreads, two chunks' splits in flight at
// once (16-byte loads: a fold reads splits times the row's bytes); otherwise element by
// element.
__device__ void fold_row(const RmsNormParams& p, int64_t r, float* x) {
  const float* part = p.partials + r * p.dim;
  const int64_t split_stride = int64_t{p.num_rows} * p.dim;
  const bool vec = p.dim % 4 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(p.partials) % 16 == 0;
  if (!vec) {
    for (int i = threadIdx.x; i < p.dim; i += kNormThreads) {
      x[i] = x[i] + sum_partials_scalar(part + i, split_stride, p.splits);
    }
    return;
  }
  constexpr int kVecs = 2;
  const int chunks = p.dim / 4;
  for (int c0 = threadIdx.x; c0 < chunks; c0 += kVecs * kNormThreads) {
    const int valid = min(kVecs, (chunks - c0 + kNormThreads - 1) / kNormThreads);
    float4 add[kVecs];
    sum_partials<kVecs>(part + 4 * c0, split_stride, p.splits, 4 * kNormThreads, valid, add);
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (i >= valid) break;
      float4* xc = reinterpret_cast<float4*>(x) + c0 + i * kNormThreads;
      float4 a = *xc;
      a.x = a.x + add[i].x;
      a.y = a.y + add[i].y;
      a.z = a.z + add[i].z;
      a.w = a.w + add[i].w;
      *xc = a;
    }
  }
}

// kFold (RmsNormParams::partials): fold_row first, then, once every thread's stores of the
// row are visible (__syncthreads), the plain kernel's passes over the updated row, so the
// sum of squares is added in the plain order: the same bits as quant_gemm_reduce() followed
// by the plain kernel. Two instantiations, so that the plain one keeps its registers.
template <typename T, bool kFold>
__global__ void rmsnorm_kernel(RmsNormParams p) {
  using BlockReduce = cub::BlockReduce<float, kNormThreads>;
  __shared__ typename BlockReduce::TempStorage tmp;
  __shared__ float scale;
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any global access
  allow_next_grid();
  const int64_t r = blockIdx.x;
  float* x = p.x + (p.rows != nullptr ? p.rows[r] : r) * static_cast<int64_t>(p.dim);
  if constexpr (kFold) {
    fold_row(p, r, x);  // rows is null with partials: row r of x is row r of y
    __syncthreads();
  }
  float sum_sq = 0;
  for (int i = threadIdx.x; i < p.dim; i += kNormThreads) sum_sq += x[i] * x[i];
  sum_sq = BlockReduce(tmp).Sum(sum_sq);
  // 1/sqrt rather than rsqrtf (2 ulp): the CPU reference rounds the exact scale once.
  if (threadIdx.x == 0) scale = 1.f / sqrtf(sum_sq / p.dim + p.eps);
  __syncthreads();
  T* out = static_cast<T*>(p.out) + r * p.dim;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (p.round_q8) {
      // A lane 4 values (16-byte loads of x and weight, an 8-byte store), 8 lanes a unit
      // (round_q8_lanes: the unit's largest value by shuffles). Units never straddle a
      // warp's pass (dim % 32 == 0), so a lane past the row idles with its whole unit.
      const int chunks = p.dim / 4;
      const float4* x4 = reinterpret_cast<const float4*>(x);
      const float4* w4 = reinterpret_cast<const float4*>(p.weight);
      for (int c0 = threadIdx.x / 32 * 32; c0 < chunks; c0 += kNormThreads) {  // warp-uniform
        const int c = c0 + threadIdx.x % 32;
        float v[4] = {};
        if (c < chunks) {
          const float4 a = x4[c], w = w4[c];
          v[0] = __bfloat162float(__float2bfloat16_rn(a.x * scale * w.x));
          v[1] = __bfloat162float(__float2bfloat16_rn(a.y * scale * w.y));
          v[2] = __bfloat162float(__float2bfloat16_rn(a.z * scale * w.z));
          v[3] = __bfloat162float(__float2bfloat16_rn(a.w * scale * w.w));
        }
        round_q8_lanes<4>(v);
        if (c < chunks) {
          const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
          const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
          reinterpret_cast<uint2*>(out)[c] = make_uint2(
              *reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
        }
      }
      return;
    }
  }
  for (int i = threadIdx.x; i < p.dim; i += kNormThreads) store(out, i, x[i] * scale * p.weight[i]);
}

// Element pair (a, b) of pair i within a head.
__device__ __forceinline__ int2 rope_pair(RopeStyle style, int i, int half) {
  return style == RopeStyle::kAdjacentPairs ? make_int2(2 * i, 2 * i + 1) : make_int2(i, i + half);
}

// One block per token; thread j handles pair j % half of head j / half over the Q, K and V
// heads of the token's fused projection row. With Q/K norms, a first pass sums each Q and
// K head's squares (after the bias) into shared memory, in fp32 (the CPU reference sums in
// double: the difference is fp32 rounding of a sum of head_dim terms).
template <typename T>
__global__ void rope_append_kernel(RopeAppendParams p) {
  extern __shared__ float head_sum_sq[];  // [num_heads + num_kv_heads] with Q/K norms
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any global access
  allow_next_grid();
  const int64_t t = blockIdx.x;
  const int half = p.head_dim / 2;
  const int num_pairs = (p.num_heads + 2 * p.num_kv_heads) * half;
  const int num_qk_heads = p.num_heads + p.num_kv_heads;
  const T* row = static_cast<const T*>(p.qkv) + t * 2 * num_pairs;
  auto element = [&](int e) { return load(row, e) + (p.bias != nullptr ? p.bias[e] : 0.f); };
  const bool qk_norm = p.q_norm != nullptr;
  if (qk_norm) {
    for (int h = threadIdx.x; h < num_qk_heads; h += blockDim.x) head_sum_sq[h] = 0.f;
    __syncthreads();
    for (int j = threadIdx.x; j < num_qk_heads * half; j += blockDim.x) {
      const int head = j / half;
      const int2 ab = rope_pair(p.style, j % half, half);
      const float x = element(head * p.head_dim + ab.x), y = element(head * p.head_dim + ab.y);
      atomicAdd(&head_sum_sq[head], x * x + y * y);
    }
    __syncthreads();
  }
  const int64_t slot = p.slot_mapping[t];
  const float* cos = p.cos + static_cast<int64_t>(p.positions[t]) * half;
  const float* sin = p.sin + static_cast<int64_t>(p.positions[t]) * half;
  for (int j = threadIdx.x; j < num_pairs; j += blockDim.x) {
    const int head = j / half, i = j % half;
    const int2 ab = rope_pair(p.style, i, half);
    const int a = ab.x, b = ab.y;
    float x = element(head * p.head_dim + a), y = element(head * p.head_dim + b);
    if (head < num_qk_heads) {  // Q or K: normalise (optionally), then rotate
      if (qk_norm) {
        // 1/sqrt rather than rsqrtf, as in rmsnorm_kernel: the reference rounds the scale once.
        const float scale = 1.f / sqrtf(head_sum_sq[head] / p.head_dim + p.norm_eps);
        const float* w = head < p.num_heads ? p.q_norm : p.k_norm;
        x = x * scale * w[a];
        y = y * scale * w[b];
      }
      const float c = cos[i], s = sin[i];
      const float rx = x * c - y * s, ry = x * s + y * c;
      x = rx;
      y = ry;
    }
    T* dst;
    if (head < p.num_heads) {
      dst = static_cast<T*>(p.q_out) + (t * p.num_heads + head) * p.head_dim;
    } else {
      if (slot < 0) continue;
      const bool is_k = head < num_qk_heads;
      const int kv_head = (head - p.num_heads) % p.num_kv_heads;
      const int64_t offset = kv_cache_offset(slot / p.block_size, kv_head, slot % p.block_size,
                                             p.num_kv_heads, p.block_size, p.head_dim);
      dst = static_cast<T*>(is_k ? p.k_cache : p.v_cache) + offset;
    }
    store(dst, a, x);
    store(dst, b, y);
  }
}

// swiglu_kernel with SwigluParams::partials in place of gate_up, a kernel of its own so that
// the plain one keeps its registers: gate and up summed over the splits and rounded to T, as
// quant_gemm_reduce() would have stored them, read back. round_q8 (bf16): 8 outputs a lane
// as swiglu_kernel's vector path, their gate and up sums' loads (4 float4s a split) in
// flight together; otherwise one output a thread.
template <typename T>
__global__ void swiglu_partials_kernel(SwigluParams p) {
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any global access
  allow_next_grid();
  const int64_t n = static_cast<int64_t>(p.num_rows) * p.ffn_size;
  const int64_t split_stride = 2 * n;
  T* out = static_cast<T*>(p.out);
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  auto rounded = [](float v) { return DTypeTraits<T>::to_float(DTypeTraits<T>::from_float(v)); };
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (p.round_q8) {
      const int64_t chunks = n / 8;
      for (int64_t c0 = first / 32 * 32; c0 < chunks; c0 += stride) {  // warp-uniform
        const int64_t c = c0 + threadIdx.x % 32;
        float v[8] = {};
        if (c < chunks) {
          // gate's 8 floats (2 float4s), then up's, ffn_size further on
          const int64_t at = c * 8 / p.ffn_size * 2 * p.ffn_size + c * 8 % p.ffn_size;
          float4 g[2], up[2];
          sum_partials<2>(p.partials + at, split_stride, p.splits, 4, 2, g);
          sum_partials<2>(p.partials + at + p.ffn_size, split_stride, p.splits, 4, 2, up);
          const float gf[8] = {g[0].x, g[0].y, g[0].z, g[0].w, g[1].x, g[1].y, g[1].z, g[1].w};
          const float uf[8] = {up[0].x, up[0].y, up[0].z, up[0].w,
                               up[1].x, up[1].y, up[1].z, up[1].w};
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const float ge = rounded(gf[e]);
            v[e] = __bfloat162float(__float2bfloat16_rn(ge / (1.f + expf(-ge)) * rounded(uf[e])));
          }
        }
        round_q8_lanes<8>(v);
        if (c < chunks) reinterpret_cast<uint4*>(out)[c] = quant_gemv::narrow_bf16x8(v);
      }
      return;
    }
  }
  for (int64_t e = first; e < n; e += stride) {
    const int64_t at = e / p.ffn_size * 2 * p.ffn_size + e % p.ffn_size;
    const float g = rounded(sum_partials_scalar(p.partials + at, split_stride, p.splits));
    const float u = rounded(sum_partials_scalar(p.partials + at + p.ffn_size, split_stride,
                                                p.splits));
    store(out, e, g / (1.f + expf(-g)) * u);
  }
}

template <typename T>
__global__ void swiglu_kernel(SwigluParams p) {
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any global access
  allow_next_grid();
  const int64_t n = static_cast<int64_t>(p.num_rows) * p.ffn_size;
  const T* gate_up = static_cast<const T*>(p.gate_up);
  T* out = static_cast<T*>(p.out);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (p.round_q8) {
      // A lane 8 outputs (16-byte loads of gate and up, a 16-byte store), 4 lanes a unit
      // (round_q8_lanes); swiglu() sized the grid for chunks of 8. A chunk never straddles a
      // row (ffn_size % 32 == 0) and a warp's pass covers whole units.
      const int64_t chunks = n / 8;
      const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;  // a multiple of 32
      for (int64_t c0 = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32 * 32;
           c0 < chunks; c0 += stride) {  // warp-uniform
        const int64_t c = c0 + threadIdx.x % 32;
        float v[8] = {};
        if (c < chunks) {
          const int64_t r = c * 8 / p.ffn_size, col = c * 8 % p.ffn_size;
          const T* g_row = gate_up + r * 2 * p.ffn_size + col;
          float g[8], up[8];
          quant_gemv::widen_bf16x8(*reinterpret_cast<const uint4*>(g_row), g);
          quant_gemv::widen_bf16x8(*reinterpret_cast<const uint4*>(g_row + p.ffn_size), up);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            v[e] = __bfloat162float(__float2bfloat16_rn(g[e] / (1.f + expf(-g[e])) * up[e]));
          }
        }
        round_q8_lanes<8>(v);
        if (c < chunks) reinterpret_cast<uint4*>(out)[c] = quant_gemv::narrow_bf16x8(v);
      }
      return;
    }
  }
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / p.ffn_size, c = e % p.ffn_size;
    const float g = load(gate_up, r * 2 * p.ffn_size + c);
    const float u = load(gate_up, r * 2 * p.ffn_size + p.ffn_size + c);
    store(out, e, g / (1.f + expf(-g)) * u);  // exp overflow -> g / inf = -0, silu's limit
  }
}

// Runs f(TypeTag<T>{}) (a launch returning its cudaError_t) for the element type of
// `dtype`, then checks the launch.
template <typename F>
absl::Status with_dtype(const char* op, DType dtype, F&& f) {
  return dispatch_dtype(op, dtype, [&](auto tag) -> absl::Status {
    CUDA_CHECK(f(tag));
    CUDA_CHECK(cudaGetLastError());
    return absl::OkStatus();
  });
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

absl::Status invalid(const char* what, int64_t value) {
  return absl::InvalidArgumentError(absl::StrCat(what, value));
}

}  // namespace
}  // namespace device

absl::Status embedding_gather(const EmbeddingParams& p, cudaStream_t stream) {
  if (p.num_tokens < 0 || p.dim < 1) return device::invalid("embedding_gather: bad dim ", p.dim);
  if (p.num_tokens == 0) return absl::OkStatus();
  return device::with_dtype("embedding_gather", p.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return device::launch_dependent(device::embedding_kernel<T>, p.num_tokens,
                                    device::kElementwiseThreads, 0, stream, p);
  });
}

absl::Status rmsnorm(const RmsNormParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.dim < 1) return device::invalid("rmsnorm: bad dim ", p.dim);
  if (p.round_q8 && (p.dtype != DType::kBf16 || p.dim % kQuantUnit != 0 ||
                     !device::aligned16(p.x) || !device::aligned16(p.weight) ||
                     !device::aligned16(p.out))) {
    return device::invalid(
        "rmsnorm: round_q8 needs bf16, 16-byte aligned x, weight and out and a dim that is a "
        "multiple of 32, dim ",
        p.dim);
  }
  if (p.partials != nullptr && (p.rows != nullptr || p.splits < 1)) {
    return device::invalid(
        "rmsnorm: partials need every row (rows null) and at least one split, splits ",
        p.splits);
  }
  if (p.num_rows == 0) return absl::OkStatus();
  return device::with_dtype("rmsnorm", p.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* kernel = p.partials != nullptr ? device::rmsnorm_kernel<T, true>
                                         : device::rmsnorm_kernel<T, false>;
    return device::launch_dependent(kernel, p.num_rows, device::kNormThreads, 0, stream, p);
  });
}

absl::Status rope_qkv_append(const RopeAppendParams& p, cudaStream_t stream) {
  if (p.head_dim < 2 || p.head_dim % 2 != 0) {
    return device::invalid("rope_qkv_append: head_dim must be even, got ", p.head_dim);
  }
  if (p.num_kv_heads < 1 || p.num_heads < 1 || p.block_size < 1) {
    return device::invalid("rope_qkv_append: bad head count or block size, num_kv_heads ",
                           p.num_kv_heads);
  }
  if ((p.q_norm == nullptr) != (p.k_norm == nullptr)) {
    return absl::InvalidArgumentError("rope_qkv_append: q_norm and k_norm are set together");
  }
  if (p.num_tokens == 0) return absl::OkStatus();
  const int num_pairs = (p.num_heads + 2 * p.num_kv_heads) * p.head_dim / 2;
  const int threads = std::min(1024, (num_pairs + 31) / 32 * 32);
  const size_t smem = p.q_norm != nullptr ? (p.num_heads + p.num_kv_heads) * sizeof(float) : 0;
  return device::with_dtype("rope_qkv_append", p.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return device::launch_dependent(device::rope_append_kernel<T>, p.num_tokens, threads,
                                    static_cast<unsigned>(smem), stream, p);
  });
}

absl::Status swiglu(const SwigluParams& p, cudaStream_t stream) {
  if (p.num_rows < 0 || p.ffn_size < 1) return device::invalid("swiglu: bad ffn_size ", p.ffn_size);
  if (p.round_q8 && (p.dtype != DType::kBf16 || p.ffn_size % kQuantUnit != 0 ||
                     (p.partials == nullptr && !device::aligned16(p.gate_up)) ||
                     !device::aligned16(p.out))) {
    return device::invalid(
        "swiglu: round_q8 needs bf16, 16-byte aligned gate_up and out and an ffn_size that is a "
        "multiple of 32, ffn_size ",
        p.ffn_size);
  }
  if (p.partials != nullptr &&
      (p.splits < 1 || (p.round_q8 && !device::aligned16(p.partials)))) {
    return device::invalid(
        "swiglu: partials need at least one split (16-byte aligned with round_q8), splits ",
        p.splits);
  }
  const int64_t n = static_cast<int64_t>(p.num_rows) * p.ffn_size;
  if (n == 0) return absl::OkStatus();
  const int64_t items = p.round_q8 ? n / 8 : n;  // threads: 8-element chunks or elements
  const int64_t blocks = std::min<int64_t>(
      (items + device::kElementwiseThreads - 1) / device::kElementwiseThreads,
      device::kMaxGridStrideBlocks);
  return device::with_dtype("swiglu", p.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto* kernel = p.partials != nullptr ? device::swiglu_partials_kernel<T>
                                         : device::swiglu_kernel<T>;
    return device::launch_dependent(kernel, static_cast<unsigned>(blocks),
                                    device::kElementwiseThreads, 0, stream, p);
  });
}

}  // namespace flashserve::kernels
