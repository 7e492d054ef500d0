// The sampling kernel of kernels/sampling.h: one 1024-thread block per row.
//
// Layout. Thread t owns the contiguous id range [t * chunk, (t + 1) * chunk), chunk =
// ceil(vocab / 1024) (48 for a 49152 vocabulary), so that "in ascending id order" questions
// (the draw, ties at a top-k / top-p cut) become one block-wide exclusive scan of per-thread
// partial sums followed by one thread walking its own chunk. The row (192 KiB for 49152
// fp32 logits) stays in L1/L2 across the passes below; each pass re-reads it.
//
// Top-k and top-p without sorting. The kept set is always {key > K} plus the ties {key == K}
// with id <= cut, where key is an order-preserving uint32 image of the scaled log-weight z.
// top-k finds K as the largest key with count(key >= K) >= k, top-p as the largest key with
// mass(kept, key >= K) >= top_p * mass(kept): bisection over the 32 key bits, one block
// reduction per bit. The ties at K are then taken in id order up to the count / mass still
// needed. Cost: ~32 block reductions per filter; greedy rows take one pass.
#include <cfloat>
#include <climits>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/dependent_launch.cuh"
#include "kernels/sampling.h"

namespace flashserve::kernels {
namespace device {
namespace {

constexpr int kThreads = 1024;

struct ArgMax {
  float value;
  int id;
};
// More likely: larger value, then lower id.
__device__ __forceinline__ bool before(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}
struct ArgMaxOp {
  __device__ __forceinline__ ArgMax operator()(const ArgMax& a, const ArgMax& b) const {
    return before(a.value, a.id, b.value, b.id) ? a : b;
  }
};

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Order-preserving map of a float onto uint32 (larger float -> larger key). Callers pass
// z + 0.f so that -0 and +0, equal as floats, get one key.
__device__ __forceinline__ uint32_t ordered_key(float z) {
  const uint32_t bits = __float_as_uint(z);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

// Block-wide collectives over kThreads threads; every thread gets the result.
class Block {
 public:
  __device__ float sum(float v) {
    const float r = cub::BlockReduce<float, kThreads>(tmp_.reduce_f).Sum(v);
    return broadcast(r);
  }
  __device__ float max(float v) {
    const float r = cub::BlockReduce<float, kThreads>(tmp_.reduce_f).Reduce(v, MaxOp());
    return broadcast(r);
  }
  __device__ int count(int v) {
    const int r = cub::BlockReduce<int, kThreads>(tmp_.reduce_i).Sum(v);
    __syncthreads();
    if (threadIdx.x == 0) bcast_i_ = r;
    __syncthreads();
    return bcast_i_;
  }
  __device__ ArgMax argmax(ArgMax v) {
    const ArgMax r = cub::BlockReduce<ArgMax, kThreads>(tmp_.reduce_a).Reduce(v, ArgMaxOp());
    __syncthreads();
    if (threadIdx.x == 0) bcast_a_ = r;
    __syncthreads();
    return bcast_a_;
  }
  // Exclusive prefix of v over threads; *total = the sum over all threads.
  __device__ float exclusive_sum(float v, float* total) {
    float prefix;
    cub::BlockScan<float, kThreads>(tmp_.scan_f).ExclusiveSum(v, prefix, *total);
    __syncthreads();
    return prefix;
  }
  __device__ int exclusive_count(int v) {
    int prefix;
    cub::BlockScan<int, kThreads>(tmp_.scan_i).ExclusiveSum(v, prefix);
    __syncthreads();
    return prefix;
  }
  // A value that one thread found (the lowest thread wins); `none` when nobody offers.
  __device__ void reset_found(int none) {
    if (threadIdx.x == 0) found_ = none;
    __syncthreads();
  }
  __device__ void offer(int v) { atomicMin(&found_, v); }
  __device__ int found() {
    __syncthreads();
    return found_;
  }

 private:
  __device__ float broadcast(float r) {
    __syncthreads();
    if (threadIdx.x == 0) bcast_f_ = r;
    __syncthreads();
    return bcast_f_;
  }
  union {
    typename cub::BlockReduce<float, kThreads>::TempStorage reduce_f;
    typename cub::BlockReduce<int, kThreads>::TempStorage reduce_i;
    typename cub::BlockReduce<ArgMax, kThreads>::TempStorage reduce_a;
    typename cub::BlockScan<float, kThreads>::TempStorage scan_f;
    typename cub::BlockScan<int, kThreads>::TempStorage scan_i;
  } tmp_;
  float bcast_f_;
  int bcast_i_;
  ArgMax bcast_a_;
  int found_;
};

// One row's state as seen by one thread.
struct Row {
  float* logits;
  int vocab;
  int begin, end;  // this thread's ids
  float max_logit;
  float temperature;
  // A true division, as in the CPU reference (a reciprocal multiply rounds differently).
  __device__ float z(int i) const { return (logits[i] - max_logit) / temperature + 0.f; }
};

// The kept set: key > k, or key == k and id <= cut.
struct Selection {
  uint32_t k = 0;
  int cut = INT_MAX;
  __device__ bool keeps(uint32_t key, int id) const { return key > k || (key == k && id <= cut); }
};

// Largest key K such that pred_total(K) >= need, where pred_total(K) is monotone
// non-increasing in K: bisection from the top bit.
template <typename Total>
__device__ uint32_t largest_key(Total total_at_least) {
  uint32_t k = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t candidate = k | (1u << bit);
    if (total_at_least(candidate)) k = candidate;
  }
  return k;
}

__device__ Selection select_top_k(Block& block, const Row& row, const Selection& sel, int top_k) {
  auto count_from = [&](uint32_t from, bool strictly) {
    int n = 0;
    for (int i = row.begin; i < row.end; ++i) {
      const uint32_t key = ordered_key(row.z(i));
      n += sel.keeps(key, i) && (strictly ? key > from : key >= from);
    }
    return block.count(n);
  };
  Selection out;
  out.k = largest_key([&](uint32_t c) { return count_from(c, false) >= top_k; });
  const int ties_needed = top_k - count_from(out.k, true);
  int ties = 0;
  for (int i = row.begin; i < row.end; ++i) {
    const uint32_t key = ordered_key(row.z(i));
    ties += sel.keeps(key, i) && key == out.k;
  }
  int seen = block.exclusive_count(ties);
  block.reset_found(INT_MAX);
  if (seen < ties_needed && ties_needed <= seen + ties) {
    for (int i = row.begin; i < row.end; ++i) {
      const uint32_t key = ordered_key(row.z(i));
      if (sel.keeps(key, i) && key == out.k && ++seen == ties_needed) {
        block.offer(i);
        break;
      }
    }
  }
  out.cut = block.found();
  return out;
}

__device__ Selection select_top_p(Block& block, const Row& row, const Selection& sel, float top_p) {
  auto mass_from = [&](uint32_t from, bool strictly) {
    float m = 0;
    for (int i = row.begin; i < row.end; ++i) {
      const float z = row.z(i);
      const uint32_t key = ordered_key(z);
      if (sel.keeps(key, i) && (strictly ? key > from : key >= from)) m += expf(z);
    }
    return block.sum(m);
  };
  const float target = top_p * mass_from(0, false);
  Selection out;
  out.k = largest_key([&](uint32_t c) { return mass_from(c, false) >= target; });
  const float remaining = target - mass_from(out.k, true);
  float tie_mass = 0;
  int last_tie = -1;
  for (int i = row.begin; i < row.end; ++i) {
    const float z = row.z(i);
    const uint32_t key = ordered_key(z);
    if (sel.keeps(key, i) && key == out.k) {
      tie_mass += expf(z);
      last_tie = i;
    }
  }
  float total;
  float cumulative = block.exclusive_sum(tie_mass, &total);
  block.reset_found(INT_MAX);
  if (cumulative < remaining && remaining <= cumulative + tie_mass) {
    for (int i = row.begin; i < row.end; ++i) {
      const float z = row.z(i);
      const uint32_t key = ordered_key(z);
      if (!sel.keeps(key, i) || key != out.k) continue;
      cumulative += expf(z);
      if (cumulative >= remaining) {
        block.offer(i);
        break;
      }
    }
  }
  out.cut = block.found();
  if (out.cut == INT_MAX) {  // rounding left `remaining` unreached: keep every tie
    out.cut = static_cast<int>(block.max(static_cast<float>(last_tie)));
  }
  return out;
}

// Step 8 of kernels/sampling.h: the first kept id (ascending) whose running weight passes
// uniform * total.
__device__ int draw(Block& block, const Row& row, const Selection& sel, float log_min_p,
                    double uniform) {
  auto weight = [&](int i) {
    const float z = row.z(i);
    return sel.keeps(ordered_key(z), i) && z >= log_min_p ? expf(z) : 0.f;
  };
  float mass = 0;
  int last_positive = -1;
  for (int i = row.begin; i < row.end; ++i) {
    const float w = weight(i);
    mass += w;
    if (w > 0) last_positive = i;
  }
  float total;
  float cumulative = block.exclusive_sum(mass, &total);
  const float target = static_cast<float>(uniform * total);
  block.reset_found(INT_MAX);
  if (cumulative + mass > target) {
    for (int i = row.begin; i < row.end; ++i) {
      cumulative += weight(i);
      if (cumulative > target) {
        block.offer(i);
        break;
      }
    }
  }
  const int token = block.found();
  if (token != INT_MAX) return token;
  return static_cast<int>(block.max(static_cast<float>(last_positive)));  // rounding at the top
}

// One block-wide pass over a row, in 16-byte loads, kInFlight of them per thread issued
// before any is used: the row (192 KiB at a 49152 vocabulary) is one block's to read, so
// bytes in flight set the pass's time (scalar loads and two passes were slower: measured in
// bench/serving/NOTES.md, step 7). kSanitize: NaN logits become -inf in place (step 0);
// kArgMax: returns this thread's best (value, id) after that (step 3; NaN is never before
// anything, and the caller reads an all -inf row as token 0). Every element is
// visited once, in no particular order: both steps are order-free (`before` is a total order).
template <bool kSanitize, bool kArgMax>
__device__ __forceinline__ ArgMax scan_row(float* logits, int vocab) {
  constexpr int kInFlight = 4;
  ArgMax best{kNegInf, INT_MAX};
  auto visit = [&](int i, float x) {
    if (kSanitize && isnan(x)) {
      logits[i] = kNegInf;
      x = kNegInf;
    }
    if (kArgMax && before(x, i, best.value, best.id)) best = {x, i};
  };
  // Rows start at row * vocab floats: a scalar head up to the first 16-byte boundary.
  const int misaligned = static_cast<int>((reinterpret_cast<uintptr_t>(logits) / 4) % 4);
  const int head = min(vocab, (4 - misaligned) % 4);
  for (int i = threadIdx.x; i < head; i += kThreads) visit(i, logits[i]);
  const int num_vec = (vocab - head) / 4;
  const float4* vec = reinterpret_cast<const float4*>(logits + head);
  for (int j0 = threadIdx.x; j0 < num_vec; j0 += kThreads * kInFlight) {
    float4 x[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int j = j0 + u * kThreads;
      if (j < num_vec) x[u] = vec[j];
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int j = j0 + u * kThreads;
      if (j >= num_vec) break;
      const int i = head + 4 * j;
      visit(i, x[u].x);
      visit(i + 1, x[u].y);
      visit(i + 2, x[u].z);
      visit(i + 3, x[u].w);
    }
  }
  for (int i = head + 4 * num_vec + threadIdx.x; i < vocab; i += kThreads) visit(i, logits[i]);
  return best;
}

__device__ float penalised(float l, const SampleSpec& s, int count) {
  if (s.repetition_penalty != 1.f) l = l > 0 ? l / s.repetition_penalty : l * s.repetition_penalty;
  if (count > 0) l -= static_cast<float>(count) * s.frequency_penalty + s.presence_penalty;
  return l == kNegInf ? l : fminf(fmaxf(l, -FLT_MAX), FLT_MAX);
}

// Step 1: log-sum-exp of the raw row and the top list. Returns the LSE.
__device__ float raw_logprobs(Block& block, const Row& row, const SampleSpec& s,
                              SampleResult* result) {
  float m = kNegInf;
  for (int i = row.begin; i < row.end; ++i) m = fmaxf(m, row.logits[i]);
  m = block.max(m);
  float sum = 0;
  if (m != kNegInf) {
    for (int i = row.begin; i < row.end; ++i) sum += expf(row.logits[i] - m);
  }
  sum = block.sum(sum);
  const float lse = m == kNegInf ? kNegInf : m + logf(sum);
  float prev_value = __int_as_float(0x7f800000);  // +inf: "after" the previous pick
  int prev_id = -1;
  for (int j = 0; j < s.num_top_logprobs; ++j) {
    ArgMax best{kNegInf, INT_MAX};
    for (int i = row.begin; i < row.end; ++i) {
      const float v = row.logits[i];
      if (before(prev_value, prev_id, v, i) && before(v, i, best.value, best.id)) best = {v, i};
    }
    best = block.argmax(best);
    if (best.id == INT_MAX) break;  // fewer tokens than asked
    if (threadIdx.x == 0) {
      result->top_tokens[j] = best.id;
      result->top_logprobs[j] = best.value - lse;
    }
    prev_value = best.value;
    prev_id = best.id;
  }
  return lse;
}

__global__ void __launch_bounds__(kThreads) sampling_kernel(SamplingBatch b) {
  __shared__ Block block;
  wait_for_prior_grid();  // kernels/dependent_launch.cuh: before any global access
  allow_next_grid();
  const int r = blockIdx.x;
  const SampleSpec s = b.specs[r];
  SampleResult* result = b.results + r;
  Row row;
  row.logits = b.logits + static_cast<int64_t>(r) * b.vocab;
  row.vocab = b.vocab;
  const int chunk = (b.vocab + kThreads - 1) / kThreads;
  row.begin = min(b.vocab, static_cast<int>(threadIdx.x) * chunk);
  row.end = min(b.vocab, row.begin + chunk);

  // Steps 0 and 3 visit every logit and do not depend on the order: scan_row, coalesced
  // (the per-thread chunks of the filters are not). With nothing between them (no logprobs,
  // no penalties: every greedy request of the benchmark) they are one pass.
  const bool need_lse = s.want_logprob != 0 || s.num_top_logprobs > 0;
  float lse = 0.f;
  ArgMax best;
  if (!need_lse && s.penalty_begin == s.penalty_end) {
    best = scan_row<true, true>(row.logits, b.vocab);  // steps 0 and 3
    __syncthreads();
  } else {
    scan_row<true, false>(row.logits, b.vocab);  // step 0
    __syncthreads();
    if (need_lse) lse = raw_logprobs(block, row, s, result);
    for (int e = s.penalty_begin + threadIdx.x; e < s.penalty_end; e += kThreads) {  // step 2
      const int t = b.penalty_tokens[e];
      if (t < 0 || t >= b.vocab) continue;
      b.penalty_scratch[e] = row.logits[t];
      row.logits[t] = penalised(row.logits[t], s, b.penalty_counts[e]);
    }
    __syncthreads();
    best = scan_row<false, true>(row.logits, b.vocab);  // step 3
  }
  best = block.argmax(best);
  int token = best.id == INT_MAX || best.value == kNegInf ? 0 : best.id;
  if (s.temperature > 0 && best.value != kNegInf) {  // steps 4-8
    row.max_logit = best.value;
    row.temperature = s.temperature;
    Selection sel;
    if (s.top_k > 0 && s.top_k < b.vocab) sel = select_top_k(block, row, sel, s.top_k);
    if (s.top_p < 1.f) sel = select_top_p(block, row, sel, s.top_p);
    const float log_min_p = s.min_p > 0.f ? logf(s.min_p) : kNegInf;
    token = draw(block, row, sel, log_min_p, s.uniform);
  }

  if (threadIdx.x == 0) {
    result->token = token;
    result->logprob = 0.f;
  }
  if (s.want_logprob == 0) return;
  // Step 9: the chosen token's raw logit is in the scratch if a penalty changed it.
  block.reset_found(INT_MAX);
  for (int e = s.penalty_begin + threadIdx.x; e < s.penalty_end; e += kThreads) {
    if (b.penalty_tokens[e] == token) block.offer(e);
  }
  const int entry = block.found();
  if (threadIdx.x == 0) {
    const float raw = entry != INT_MAX ? b.penalty_scratch[entry] : row.logits[token];
    result->logprob = lse == kNegInf ? kNegInf : raw - lse;
  }
}

// One thread per (t, i) pair: a handful of tokens per step, so one CTA in practice.
__global__ void gather_sampled_tokens_kernel(SampledTokenGather g) {
  wait_for_prior_grid();  // the metadata copy and the previous step's sampling wrote both sides
  allow_next_grid();
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p < g.num_pairs) g.token_ids[g.pairs[2 * p]] = g.results[g.pairs[2 * p + 1]].token;
}

}  // namespace
}  // namespace device

absl::Status gather_sampled_tokens(const SampledTokenGather& g, cudaStream_t stream) {
  if (g.num_pairs < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gather_sampled_tokens: num_pairs ", g.num_pairs));
  }
  if (g.num_pairs == 0) return absl::OkStatus();
  constexpr int kGatherThreads = 256;
  CUDA_CHECK(device::launch_dependent(device::gather_sampled_tokens_kernel,
                                      (g.num_pairs + kGatherThreads - 1) / kGatherThreads,
                                      kGatherThreads, 0, stream, g));
  return absl::OkStatus();
}

absl::Status sample_tokens(const SamplingBatch& b, cudaStream_t stream) {
  if (b.num_rows < 0 || b.vocab < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample_tokens: num_rows ", b.num_rows, ", vocab ", b.vocab));
  }
  if (b.num_rows == 0) return absl::OkStatus();
  CUDA_CHECK(device::launch_dependent(device::sampling_kernel, b.num_rows, device::kThreads, 0,
                                      stream, b));
  return absl::OkStatus();
}

}  // namespace flashserve::kernels
