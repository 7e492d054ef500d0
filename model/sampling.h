#pragma once
// Sampling settings of a request and the per-sequence host state that turns them into one
// kernels::SampleSpec per step. The sampling itself runs inside the model runner (on the
// device for the CUDA backend, kernels/cpu/sampling.h for the CPU backend); the rules, step
// by step, are in kernels/sampling.h.
//
// What stays on the host, per sequence:
//  - the RNG: std::mt19937_64 seeded from params.seed (has_seed) or a fallback seed. One
//    draw per sampled (temperature > 0) token, none for greedy; the uniform is the top 53
//    bits of one 64-bit draw (the same on every standard library), so a seed gives the same
//    stream of uniforms on every backend and the same tokens wherever the logits agree.
//  - the penalty list: each distinct token of the history once, with its count among the
//    generated tokens (frequency/presence penalties count generated tokens only; the
//    repetition penalty covers prompt and generated tokens). Built in O(history) per step,
//    only for requests that use a penalty.
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "kernels/sampling.h"

namespace flashserve::model {

// The accepted ranges, in one place: validate() below enforces them for every caller of the
// engine, and the gRPC layer (server/api/validation.h) checks the same constants to name the
// request field in its errors.
inline constexpr int kMaxLogprobs = kernels::kMaxTopLogprobs;
inline constexpr float kMaxTemperature = 100.f;
inline constexpr float kMaxRepetitionPenalty = 10.f;
inline constexpr float kMaxAbsPenalty = 2.f;  // presence_penalty and frequency_penalty

struct SamplingParams {
  float temperature = 0;  // 0 = greedy; [0, kMaxTemperature]
  int top_k = 0;          // 0 = off; >= 0 (>= the vocabulary keeps every token)
  float top_p = 1;        // (0, 1]
  float min_p = 0;        // [0, 1]
  float repetition_penalty = 1;  // (0, kMaxRepetitionPenalty]; 1 = off
  float presence_penalty = 0;    // [-kMaxAbsPenalty, kMaxAbsPenalty]
  float frequency_penalty = 0;   // [-kMaxAbsPenalty, kMaxAbsPenalty]
  uint64_t seed = 0;
  bool has_seed = false;
  int num_logprobs = 0;  // top logprobs to report, [0, kMaxLogprobs]
};

// InvalidArgument naming the field and the value when a parameter is out of range or NaN.
absl::Status validate(const SamplingParams& params);

// The sampled token of one sequence, as the runner returns it.
struct SampledToken {
  int32_t token = 0;
  float logprob = 0;  // raw log-softmax of `token` (when asked)
  // The num_logprobs most likely tokens of the raw distribution, most likely first (ties:
  // lower id first), with their raw logprobs (when asked).
  std::vector<std::pair<int32_t, float>> top_logprobs;
};

// One per sequence. Not thread-safe; deterministic given the seed.
class Sampler {
 public:
  // REQUIRES: validate(params).ok().
  Sampler(const SamplingParams& params, uint64_t fallback_seed, bool want_logprob = false);

  // The spec of the next sampled token (advances the RNG when temperature > 0). Appends this
  // sequence's penalty entries to *penalty_tokens / *penalty_counts and points the spec's
  // [penalty_begin, penalty_end) at them. Token ids outside [0, vocab) are ignored.
  kernels::SampleSpec next_spec(std::span<const int32_t> prompt_tokens,
                                std::span<const int32_t> generated_tokens, int vocab,
                                std::vector<int32_t>* penalty_tokens,
                                std::vector<int32_t>* penalty_counts);
  // A penalty is on: next_spec reads the token history (so every token must be known).
  bool uses_history() const {
    return params_.repetition_penalty != 1.f || params_.presence_penalty != 0.f ||
           params_.frequency_penalty != 0.f;
  }

 private:
  SamplingParams params_;
  bool want_logprob_;
  std::mt19937_64 rng_;
  std::vector<int32_t> counts_;  // scratch: [vocab] generated-token counts, kept zero
  std::vector<uint8_t> seen_;    // scratch: [vocab] history marks, kept zero
};

// The SampledToken of a kernel result, with the top list trimmed to what was asked.
SampledToken to_sampled_token(const kernels::SampleResult& r, const kernels::SampleSpec& spec,
                              int vocab);

}  // namespace flashserve::model
