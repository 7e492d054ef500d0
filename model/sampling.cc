#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu/sampling.h"

#include "absl/strings/str_format.h"

namespace flashserve::model {
namespace {

// %.9g: the value as received, not rounded to 6 digits ("100.00001", not "100").
absl::Status invalid(const char* field, const std::string& range, double value) {
  return absl::InvalidArgumentError(
      absl::StrFormat("sampling: %s must be %s, got %.9g", field, range, value));
}

bool in_vocab(int32_t token, size_t vocab) {
  return token >= 0 && static_cast<size_t>(token) < vocab;
}

}  // namespace

absl::Status validate(const SamplingParams& p) {
  // Comparisons are written so that NaN fails them.
  if (!(p.temperature >= 0 && p.temperature <= kMaxTemperature)) {
    return invalid("temperature", absl::StrFormat("in [0, %g]", kMaxTemperature), p.temperature);
  }
  if (p.top_k < 0) return invalid("top_k", ">= 0 (0 = off)", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) return invalid("top_p", "in (0, 1]", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return invalid("min_p", "in [0, 1]", p.min_p);
  if (!(p.repetition_penalty > 0 && p.repetition_penalty <= kMaxRepetitionPenalty)) {
    return invalid("repetition_penalty", absl::StrFormat("in (0, %g]", kMaxRepetitionPenalty),
                   p.repetition_penalty);
  }
  const std::string penalty_range = absl::StrFormat("in [%g, %g]", -kMaxAbsPenalty, kMaxAbsPenalty);
  if (!(p.presence_penalty >= -kMaxAbsPenalty && p.presence_penalty <= kMaxAbsPenalty)) {
    return invalid("presence_penalty", penalty_range, p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -kMaxAbsPenalty && p.frequency_penalty <= kMaxAbsPenalty)) {
    return invalid("frequency_penalty", penalty_range, p.frequency_penalty);
  }
  if (p.num_logprobs < 0 || p.num_logprobs > kMaxLogprobs) {
    return invalid("num_logprobs", absl::StrFormat("in [0, %d]", kMaxLogprobs), p.num_logprobs);
  }
  return absl::OkStatus();
}

Sampler::Sampler(const SamplingParams& params, uint64_t fallback_seed, bool want_logprob)
    : params_(params),
      want_logprob_(want_logprob || params.num_logprobs > 0),
      rng_(params.has_seed ? params.seed : fallback_seed) {}

kernels::SampleSpec Sampler::next_spec(std::span<const int32_t> prompt_tokens,
                                       std::span<const int32_t> generated_tokens, int vocab,
                                       std::vector<int32_t>* penalty_tokens,
                                       std::vector<int32_t>* penalty_counts) {
  kernels::SampleSpec s;
  s.temperature = params_.temperature;
  s.top_k = params_.top_k;
  s.top_p = params_.top_p;
  s.min_p = params_.min_p;
  s.repetition_penalty = params_.repetition_penalty;
  s.presence_penalty = params_.presence_penalty;
  s.frequency_penalty = params_.frequency_penalty;
  s.num_top_logprobs = params_.num_logprobs;
  s.want_logprob = want_logprob_ ? 1 : 0;
  // 53 random bits -> a double uniform in [0, 1), the same on every standard library.
  if (params_.temperature > 0) s.uniform = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  s.penalty_begin = s.penalty_end = static_cast<int32_t>(penalty_tokens->size());
  if (!uses_history()) return s;
  const bool repetition = params_.repetition_penalty != 1.f;
  const size_t v = static_cast<size_t>(vocab);
  counts_.resize(v, 0);
  seen_.resize(v, 0);
  for (int32_t t : generated_tokens) {
    if (in_vocab(t, v)) ++counts_[t];
  }
  auto list_once = [&](int32_t t) {
    if (!in_vocab(t, v) || seen_[t]) return;
    seen_[t] = 1;
    penalty_tokens->push_back(t);
    penalty_counts->push_back(counts_[t]);
  };
  for (int32_t t : generated_tokens) list_once(t);
  if (repetition) {
    for (int32_t t : prompt_tokens) list_once(t);
  }
  // Leave the scratch arrays zero for the next call, touching only what was set.
  for (int i = s.penalty_begin; i < static_cast<int>(penalty_tokens->size()); ++i) {
    counts_[(*penalty_tokens)[i]] = 0;
    seen_[(*penalty_tokens)[i]] = 0;
  }
  s.penalty_end = static_cast<int32_t>(penalty_tokens->size());
  return s;
}

SampledToken to_sampled_token(const kernels::SampleResult& r, const kernels::SampleSpec& spec,
                              int vocab) {
  SampledToken t;
  t.token = r.token;
  t.logprob = r.logprob;
  for (int i = 0; i < std::min(spec.num_top_logprobs, vocab); ++i) {
    t.top_logprobs.emplace_back(r.top_tokens[i], r.top_logprobs[i]);
  }
  return t;
}

}  // namespace flashserve::model
