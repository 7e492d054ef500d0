#pragma once
// Token sampling for one sequence: penalties, temperature, top-k, top-p, min-p, then a draw
// from an explicitly seeded RNG. Host code over one logits row; depends only on the standard
// library and absl.
//
// Pipeline of Sampler::sample (in this order):
//  1. Logprobs of the RAW logits: log_softmax(logits as the model produced them), computed
//     before anything below changes them. We report the model's own distribution (as vLLM
//     does by default), so a token's logprob does not depend on the sampling settings;
//     OpenAI reports the processed distribution instead — we chose not to.
//  2. Penalties, in place on logits:
//     - repetition_penalty r (HF / llama.cpp): for every distinct token of prompt + generated,
//       a positive logit is divided by r, a non-positive one multiplied by r.
//     - frequency_penalty f and presence_penalty p (OpenAI / llama.cpp), over the generated
//       tokens only: logit[t] -= count[t] * f + (count[t] > 0 ? p : 0).
//     Token ids outside [0, vocab) in the histories are ignored.
//  3. temperature == 0: greedy. The token is the argmax of the penalised logits; ties go to
//     the lowest token id. Steps 4-7 are skipped and no random number is drawn.
//  4. Temperature: logits /= temperature (in place).
//  5. top-k (0 = off): keep the k largest logits (ties broken by lower id, so top_k = 1 is
//     exactly greedy).
//  6. top-p: softmax over the kept tokens; keep the smallest highest-probability prefix
//     whose mass reaches top_p (at least one token).
//  7. min-p: keep tokens with probability >= min_p * (largest probability), i.e. logit >=
//     max_logit + log(min_p) — independent of renormalisation.
//  8. Draw from the renormalised kept distribution with std::mt19937_64 seeded from
//     params.seed (has_seed) or the fallback seed; the RNG state carries over between calls of
//     one Sampler, so a sequence is reproducible from its seed. The uniform number is formed
//     from the top 53 bits of one 64-bit draw (portable across standard libraries); results
//     are reproducible on one build (exp() and summation order can differ between builds).
// NaN logits are treated as -inf. If every logit is -inf the lowest id is returned.
// Cost for vocab 49152: a few O(vocab) passes (one exp per token for the logprobs' LSE and
// one for the weights); top-k is nth_element + a sort of k; top-p is an expected-O(vocab)
// selection by probability mass (repeated nth_element halving), no full sort.
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace flashserve::model {

inline constexpr int kMaxLogprobs = 20;

struct SamplingParams {
  float temperature = 0;  // 0 = greedy; >= 0
  int top_k = 0;          // 0 = off; >= 0
  float top_p = 1;        // (0, 1]
  float min_p = 0;        // [0, 1]
  float repetition_penalty = 1;  // > 0; 1 = off
  float presence_penalty = 0;    // [-2, 2]
  float frequency_penalty = 0;   // [-2, 2]
  uint64_t seed = 0;
  bool has_seed = false;
  int num_logprobs = 0;  // top logprobs to report, [0, kMaxLogprobs]
};

// InvalidArgument naming the field and the value when a parameter is out of range or NaN.
absl::Status validate(const SamplingParams& params);

// One per sequence. Not thread-safe; deterministic given the seed.
class Sampler {
 public:
  // REQUIRES: validate(params).ok().
  explicit Sampler(const SamplingParams& params, uint64_t fallback_seed);

  struct Result {
    int32_t token = 0;
    float logprob = 0;  // raw log-softmax of `token`
    // The num_logprobs most likely tokens of the raw distribution, most likely first (ties:
    // lower id first), with their raw logprobs.
    std::vector<std::pair<int32_t, float>> top_logprobs;
  };

  // logits: [vocab], modified in place (penalties, temperature).
  // prompt_tokens + generated_tokens: the sequence so far (penalties).
  // REQUIRES: !logits.empty().
  Result sample(std::span<float> logits, std::span<const int32_t> prompt_tokens,
                std::span<const int32_t> generated_tokens);

 private:
  struct Candidate {
    float logit;
    int32_t token;
    double weight;  // exp(logit - max logit): unnormalised probability
  };

  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_tokens,
                       std::span<const int32_t> generated_tokens);
  // candidates_ = the tokens left by top-k / top-p / min-p with their weights (sorted most
  // likely first after top-k, otherwise in no particular order: the draw does not need it).
  void select_candidates(std::span<const float> logits);
  void keep_top_k(size_t k);
  void keep_top_p();
  void keep_min_p();
  int32_t draw();

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<Candidate> candidates_;  // scratch, reused across calls
  std::vector<float> raw_logits_;      // scratch: [vocab] logits before processing
  std::vector<int32_t> counts_;        // scratch: [vocab] generated-token counts, kept zero
  std::vector<uint8_t> seen_;          // scratch: [vocab] history marks, kept zero
};

}  // namespace flashserve::model
