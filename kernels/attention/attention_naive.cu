// The unfused baseline ("naive attention"), written the way a framework composes it from
// separate operators, in the input precision:
//   1. S = softmax_scale * Q K^T, fp32 accumulation, rounded to the input dtype and stored in
//      device memory ([num_seqs, num_heads, max_seqlen_q, max_seqlen_k]); masked entries -inf.
//   2. P = softmax(S) row by row in fp32 (and the LSE), rounded to the input dtype, in place.
//   3. O = P V, fp32 accumulation, rounded to the input dtype.
// S and P make two round trips through memory: this is what the fused kernels avoid, and the
// error of this pipeline against fp32 is the yardstick for theirs (at most 2x). Products use
// 16x16 shared-memory tiles of fp32 FMAs; simple, not fast.
#include "kernels/attention/attention.h"
#include "kernels/attention/attention_common.cuh"
#include "kernels/attention/attention_dispatch.cuh"
#include "kernels/cuda_plumbing.cuh"
#include "kernels/paged_kv.h"

namespace flashserve::kernels {
namespace device {
namespace {

constexpr int kNaiveTile = 16;  // 16x16 threads, one output element each

struct SeqInfo {
  int q_start, q_len, kv_len;
};
__device__ SeqInfo seq_info(const AttentionParams& p, int seq) {
  const int q_start = p.cu_seqlens_q[seq];
  return {q_start, p.cu_seqlens_q[seq + 1] - q_start, p.seqlens_k[seq]};
}
template <typename T>
__device__ const T* cache_row(const AttentionParams& p, const void* cache, int seq, int kv_head,
                              int key) {
  const int32_t block = p.block_tables[int64_t{seq} * p.max_blocks_per_seq + key / p.block_size];
  return static_cast<const T*>(cache) + kv_cache_offset(block, kv_head, key % p.block_size,
                                                        p.num_kv_heads, p.block_size, p.head_dim);
}
template <typename T>
__device__ T* score_row(const AttentionParams& p, T* scores, int seq, int head, int i) {
  return scores + ((int64_t{seq} * p.num_heads + head) * p.max_seqlen_q + i) * p.max_seqlen_k;
}

// grid (key tiles, query tiles, seq * num_heads)
template <typename T>
__global__ void naive_scores_kernel(const AttentionParams p, T* scores) {
  const int seq = blockIdx.z / p.num_heads, head = blockIdx.z % p.num_heads;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const SeqInfo s = seq_info(p, seq);
  const int i0 = blockIdx.y * kNaiveTile, j0 = blockIdx.x * kNaiveTile;
  if (i0 >= s.q_len || j0 >= s.kv_len) return;
  __shared__ float qs[kNaiveTile][kNaiveTile + 1], ks[kNaiveTile][kNaiveTile + 1];
  const int ty = threadIdx.y, tx = threadIdx.x;
  const T* q = static_cast<const T*>(p.q);
  float dot = 0.f;
  for (int c0 = 0; c0 < p.head_dim; c0 += kNaiveTile) {
    const int qi = i0 + ty, kj = j0 + ty;
    qs[ty][tx] = qi < s.q_len ? DTypeTraits<T>::to_float(
                                    q[(int64_t{s.q_start + qi} * p.num_heads + head) * p.head_dim + c0 + tx])
                              : 0.f;
    ks[ty][tx] = kj < s.kv_len
                     ? DTypeTraits<T>::to_float(cache_row<T>(p, p.k_cache, seq, kv_head, kj)[c0 + tx])
                     : 0.f;
    __syncthreads();
#pragma unroll
    for (int c = 0; c < kNaiveTile; ++c) dot += qs[ty][c] * ks[tx][c];
    __syncthreads();
  }
  const int i = i0 + ty, j = j0 + tx;
  if (i >= s.q_len || j >= s.kv_len) return;
  const int position = s.kv_len - s.q_len + i;
  const bool visible = (!p.causal || j <= position) && position - j < window_keys(p.sliding_window);
  score_row(p, scores, seq, head, i)[j] =
      DTypeTraits<T>::from_float(visible ? dot * p.softmax_scale : kNegInf);
}

__device__ float block_reduce(float x, bool is_max) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o /= 2) {
    const float y = __shfl_xor_sync(0xffffffffu, x, o);
    x = is_max ? fmaxf(x, y) : x + y;
  }
  __syncthreads();  // partial[] may still be read from a previous call
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = x;
  __syncthreads();
  x = partial[0];
  for (int w = 1; w < blockDim.x / 32; ++w) x = is_max ? fmaxf(x, partial[w]) : x + partial[w];
  return x;
}

// grid (max_seqlen_q, seq * num_heads); one row of S per CTA, in place.
template <typename T>
__global__ void naive_softmax_kernel(const AttentionParams p, T* scores) {
  const int seq = blockIdx.y / p.num_heads, head = blockIdx.y % p.num_heads;
  const SeqInfo s = seq_info(p, seq);
  const int i = blockIdx.x;
  if (i >= s.q_len) return;
  T* row = score_row(p, scores, seq, head, i);
  float m = kNegInf;
  for (int j = threadIdx.x; j < s.kv_len; j += blockDim.x) m = fmaxf(m, DTypeTraits<T>::to_float(row[j]));
  m = block_reduce(m, true);
  float sum = 0.f;
  for (int j = threadIdx.x; j < s.kv_len; j += blockDim.x) sum += expf(DTypeTraits<T>::to_float(row[j]) - m);
  sum = block_reduce(sum, false);
  for (int j = threadIdx.x; j < s.kv_len; j += blockDim.x) {
    row[j] = DTypeTraits<T>::from_float(expf(DTypeTraits<T>::to_float(row[j]) - m) / sum);
  }
  if (p.lse != nullptr && threadIdx.x == 0) {
    p.lse[int64_t{s.q_start + i} * p.num_heads + head] = sum > 0.f ? m + logf(sum) : kNegInf;
  }
}

// grid (head_dim / 16, query tiles, seq * num_heads)
template <typename T>
__global__ void naive_pv_kernel(const AttentionParams p, const T* probs) {
  const int seq = blockIdx.z / p.num_heads, head = blockIdx.z % p.num_heads;
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const SeqInfo s = seq_info(p, seq);
  const int i0 = blockIdx.y * kNaiveTile, c0 = blockIdx.x * kNaiveTile;
  if (i0 >= s.q_len) return;
  __shared__ float ps[kNaiveTile][kNaiveTile + 1], vs[kNaiveTile][kNaiveTile + 1];
  const int ty = threadIdx.y, tx = threadIdx.x;
  const int i = i0 + ty;
  float acc = 0.f;
  // V rows before the window of the tile's first query are never read (P is 0 there): the
  // cache blocks wholly before a window need not hold finite data.
  const int first_key = max(0, s.kv_len - s.q_len + i0 - window_keys(p.sliding_window) + 1);
  for (int j0 = first_key / kNaiveTile * kNaiveTile; j0 < s.kv_len; j0 += kNaiveTile) {
    const int j = j0 + tx, vj = j0 + ty;
    ps[ty][tx] = i < s.q_len && j < s.kv_len
                     ? DTypeTraits<T>::to_float(score_row(p, probs, seq, head, i)[j])
                     : 0.f;
    vs[ty][tx] = vj < s.kv_len && vj >= first_key
                     ? DTypeTraits<T>::to_float(cache_row<T>(p, p.v_cache, seq, kv_head, vj)[c0 + tx])
                     : 0.f;
    __syncthreads();
#pragma unroll
    for (int jj = 0; jj < kNaiveTile; ++jj) acc += ps[ty][jj] * vs[jj][tx];
    __syncthreads();
  }
  if (i < s.q_len) {
    static_cast<T*>(p.out)[(int64_t{s.q_start + i} * p.num_heads + head) * p.head_dim + c0 + tx] =
        DTypeTraits<T>::from_float(acc);
  }
}

}  // namespace
}  // namespace device

absl::Status attention_naive(const AttentionParams& p, void* workspace, size_t workspace_bytes,
                             cudaStream_t stream) {
  if (absl::Status s = validate_attention_params(p); !s.ok()) return s;
  if (p.round_q8_out) {
    return absl::InvalidArgumentError("attention_naive: round_q8_out is for attention_decode only");
  }
  if (absl::Status s = device::check_window_is_causal(p, "attention_naive"); !s.ok()) return s;
  if (p.cu_seqlens_q == nullptr) {
    return absl::InvalidArgumentError("attention_naive: cu_seqlens_q is null");
  }
  const size_t need = attention_naive_workspace_bytes(p);
  if (workspace_bytes < need || (need > 0 && workspace == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("attention_naive: workspace of ",
                                                   workspace_bytes, " bytes, need ", need));
  }
  if (p.num_seqs == 0 || p.max_seqlen_q == 0) return absl::OkStatus();
  if (int64_t{p.num_seqs} * p.num_heads > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attention_naive: num_seqs * num_heads ", int64_t{p.num_seqs} * p.num_heads, " > 65535"));
  }
  return device::dispatch_dtype_head_dim(p.dtype, p.head_dim, [&](auto type_tag, auto) {
    using T = typename decltype(type_tag)::type;
    T* scores = static_cast<T*>(workspace);
    constexpr int kTile = device::kNaiveTile;
    const int q_tiles = (p.max_seqlen_q + kTile - 1) / kTile;
    const int k_tiles = (p.max_seqlen_k + kTile - 1) / kTile;
    const int rows = p.num_seqs * p.num_heads;
    if (k_tiles > 0) {
      device::naive_scores_kernel<T>
          <<<dim3(k_tiles, q_tiles, rows), dim3(kTile, kTile), 0, stream>>>(p, scores);
      CUDA_CHECK(cudaGetLastError());
    }
    device::naive_softmax_kernel<T><<<dim3(p.max_seqlen_q, rows), 256, 0, stream>>>(p, scores);
    CUDA_CHECK(cudaGetLastError());
    device::naive_pv_kernel<T><<<dim3(p.head_dim / kTile, q_tiles, rows), dim3(kTile, kTile), 0,
                                 stream>>>(p, scores);
    CUDA_CHECK(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace flashserve::kernels
