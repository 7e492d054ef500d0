#pragma once
// Token sampling over rows of logits, on the device: one CTA per sampled row. Plain C++ API;
// the fp32 CPU reference with exactly the same rules is kernels/cpu/sampling.h (which also
// has the reference of the sampled-token gather below).
//
// What one row goes through (both implementations, in this order):
//  0. NaN logits become -inf (in place).
//  1. When asked (want_logprob, num_top_logprobs): the log-sum-exp of the RAW row and the
//     num_top_logprobs most likely raw tokens (logit descending, ties: lower id first). We
//     report the model's own distribution, so a logprob does not depend on the settings.
//  2. Penalties, in place, for each distinct history token t with c = its count among the
//     generated tokens (the caller lists each token once, kernels never dedupe):
//       repetition r:  l > 0 ? l / r : l * r   (only when r != 1)
//       frequency f, presence p:  l -= c * f + (c > 0 ? p : 0)
//     then clamped to [-FLT_MAX, FLT_MAX] (-inf stays -inf). The clamp keeps a tiny r such
//     as 1e-45 from making +inf, whose inf - inf = NaN would poison the softmax below.
//  3. temperature == 0: greedy, the argmax (ties: lowest id). Steps 4-8 are skipped.
//  4. Scaled log-weights z = (l - max) / temperature, weights w = exp(z). Subtracting the
//     max first keeps every z <= 0, so no temperature in (0, inf) overflows: the most likely
//     token always has w = 1 and the rest underflow to 0 at worst (a 1e-38 temperature is
//     greedy in effect, not a NaN). If every logit is -inf the row is greedy: token 0.
//     "More likely" below orders by z descending, then id ascending.
//  5. top_k in (0, vocab): keep the k most likely.
//  6. top_p < 1: keep the smallest most-likely-first prefix of the kept tokens whose weight
//     reaches top_p of their total weight (at least one token).
//  7. min_p > 0: keep tokens with z >= log(min_p), i.e. probability >= min_p * the largest.
//  8. Draw: target = uniform * (total kept weight); walking the kept tokens in ascending id
//     order, the first whose running sum exceeds target (the last kept one if rounding
//     leaves target unreached). `uniform` comes from the request's seeded RNG on the host,
//     so a seed gives the same uniform stream on every backend.
//  9. logprob of the chosen token = its raw logit - the raw log-sum-exp (step 1).
// Sums run in a different order on the device than on the CPU, so at a top-p cut or a draw
// boundary the two can differ by one token when weights differ in the last bits; everything
// else is exact.
#include <cstdint>

#include "absl/status/status.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashserve::kernels {

inline constexpr int kMaxTopLogprobs = 20;

// What to sample for one row. POD: copied to the device as is.
struct SampleSpec {
  float temperature = 0;         // 0 = greedy; >= 0
  int32_t top_k = 0;             // 0 = off
  float top_p = 1;               // (0, 1]
  float min_p = 0;               // [0, 1]
  float repetition_penalty = 1;  // > 0; 1 = off
  float presence_penalty = 0;
  float frequency_penalty = 0;
  int32_t num_top_logprobs = 0;  // [0, kMaxTopLogprobs]
  int32_t want_logprob = 0;      // 1: compute the chosen token's raw logprob
  int32_t penalty_begin = 0;     // this row's entries in the penalty arrays: [begin, end)
  int32_t penalty_end = 0;
  double uniform = 0;            // [0, 1); unused when greedy
};

// The result of one row.
struct SampleResult {
  int32_t token = 0;
  float logprob = 0;  // raw log-softmax of token (0 unless want_logprob)
  int32_t top_tokens[kMaxTopLogprobs] = {};
  float top_logprobs[kMaxTopLogprobs] = {};
};

struct SamplingBatch {
  float* logits = nullptr;                // [num_rows, vocab] fp32; modified in place
  const SampleSpec* specs = nullptr;      // [num_rows]
  const int32_t* penalty_tokens = nullptr;  // [num_penalties] distinct per row
  const int32_t* penalty_counts = nullptr;  // [num_penalties] generated-token counts
  float* penalty_scratch = nullptr;       // [num_penalties] (raw logits of penalised tokens)
  SampleResult* results = nullptr;        // [num_rows]
  int num_rows = 0;
  int vocab = 0;
};

// Device pointers everywhere; asynchronous on `stream`. InvalidArgument for a bad shape.
absl::Status sample_tokens(const SamplingBatch& b, cudaStream_t stream);

// Overlapped steps (model/runner.h, ForwardBatch::previous_samples): a step launched before
// the host has seen the previous step's samples takes those tokens on the device, from the
// previous sample_tokens' results into its own token ids, before its forward pass reads them.
struct SampledTokenGather {
  const SampleResult* results = nullptr;  // [num_results] the previous step's results
  const int32_t* pairs = nullptr;         // [num_pairs, 2]: (token index t, result index i)
  int32_t* token_ids = nullptr;           // [num_tokens]: token_ids[t] = results[i].token
  int num_pairs = 0;
};

// Device pointers; asynchronous on `stream`, a dependent launch (kernels/dependent_launch.cuh)
// that the next kernel may overlap until it waits for it. Every t is in [0, num_tokens) and
// every i in [0, num_results) (the runner's batch validation checks both: no check here).
// InvalidArgument for num_pairs < 0.
absl::Status gather_sampled_tokens(const SampledTokenGather& g, cudaStream_t stream);

}  // namespace flashserve::kernels
