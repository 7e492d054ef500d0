#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace flashserve::model {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// top-p: below this many candidates left around the cut, sorting them beats more halving.
constexpr size_t kTopPSortBelow = 64;

absl::Status invalid(const char* field, const char* range, double value) {
  return absl::InvalidArgumentError(
      absl::StrFormat("sampling: %s must be %s, got %g", field, range, value));
}

// Most likely first; equal logits: lower token id first. A strict weak order once NaN is gone.
template <typename C>
bool more_likely(const C& a, const C& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

// Lowest id among the largest logits.
int32_t argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

// Replaces NaN by -inf; returns log(sum exp(logits)), -inf when every logit is -inf.
float sanitize_and_log_sum_exp(std::span<float> logits) {
  float max_logit = kNegInf;
  for (float& l : logits) {
    if (std::isnan(l)) l = kNegInf;
    max_logit = std::max(max_logit, l);
  }
  if (max_logit == kNegInf) return kNegInf;
  double sum = 0;
  for (float l : logits) sum += std::exp(l - max_logit);  // float exp, double sum
  return static_cast<float>(max_logit + std::log(sum));
}

bool in_vocab(int32_t token, size_t vocab) {
  return token >= 0 && static_cast<size_t>(token) < vocab;
}

}  // namespace

absl::Status validate(const SamplingParams& p) {
  // Comparisons are written so that NaN fails them.
  if (!(p.temperature >= 0 && std::isfinite(p.temperature))) {
    return invalid("temperature", "a finite number >= 0", p.temperature);
  }
  if (p.top_k < 0) return invalid("top_k", ">= 0 (0 = off)", p.top_k);
  if (!(p.top_p > 0 && p.top_p <= 1)) return invalid("top_p", "in (0, 1]", p.top_p);
  if (!(p.min_p >= 0 && p.min_p <= 1)) return invalid("min_p", "in [0, 1]", p.min_p);
  if (!(p.repetition_penalty > 0 && std::isfinite(p.repetition_penalty))) {
    return invalid("repetition_penalty", "a finite number > 0", p.repetition_penalty);
  }
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2)) {
    return invalid("presence_penalty", "in [-2, 2]", p.presence_penalty);
  }
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2)) {
    return invalid("frequency_penalty", "in [-2, 2]", p.frequency_penalty);
  }
  if (p.num_logprobs < 0 || p.num_logprobs > kMaxLogprobs) {
    return invalid("num_logprobs", "in [0, 20]", p.num_logprobs);
  }
  return absl::OkStatus();
}

Sampler::Sampler(const SamplingParams& params, uint64_t fallback_seed)
    : params_(params), rng_(params.has_seed ? params.seed : fallback_seed) {}

Sampler::Result Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt_tokens,
                                std::span<const int32_t> generated_tokens) {
  Result result;
  const float log_sum_exp = sanitize_and_log_sum_exp(logits);
  if (params_.num_logprobs > 0) {
    candidates_.clear();
    for (size_t i = 0; i < logits.size(); ++i) {
      candidates_.push_back({logits[i], static_cast<int32_t>(i), 0.0});
    }
    keep_top_k(static_cast<size_t>(params_.num_logprobs));
    for (const Candidate& c : candidates_) {
      result.top_logprobs.emplace_back(c.token, c.logit - log_sum_exp);
    }
  }
  // The chosen token's raw logit is read before the in-place processing below.
  raw_logits_.assign(logits.begin(), logits.end());
  apply_penalties(logits, prompt_tokens, generated_tokens);
  if (params_.temperature == 0) {
    result.token = argmax(logits);
  } else {
    const float inv_temperature = 1.f / params_.temperature;
    for (float& l : logits) l *= inv_temperature;
    select_candidates(logits);
    result.token = draw();
  }
  result.logprob = log_sum_exp == kNegInf ? kNegInf : raw_logits_[result.token] - log_sum_exp;
  return result;
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_tokens,
                              std::span<const int32_t> generated_tokens) {
  const bool repetition = params_.repetition_penalty != 1.f;
  const bool additive = params_.presence_penalty != 0.f || params_.frequency_penalty != 0.f;
  if (!repetition && !additive) return;
  const size_t vocab = logits.size();
  counts_.resize(vocab, 0);
  seen_.resize(vocab, 0);
  for (int32_t t : generated_tokens) {
    if (in_vocab(t, vocab)) ++counts_[t];
  }
  const float r = params_.repetition_penalty;
  auto penalise_once = [&](int32_t t) {
    if (!in_vocab(t, vocab) || seen_[t]) return;
    seen_[t] = 1;
    if (repetition) logits[t] = logits[t] > 0 ? logits[t] / r : logits[t] * r;
    if (additive && counts_[t] > 0) {
      logits[t] -= counts_[t] * params_.frequency_penalty + params_.presence_penalty;
    }
  };
  for (int32_t t : generated_tokens) penalise_once(t);
  if (repetition) {
    for (int32_t t : prompt_tokens) penalise_once(t);
  }
  // Leave the scratch arrays zero for the next call, touching only what was set.
  for (int32_t t : generated_tokens) {
    if (in_vocab(t, vocab)) {
      counts_[t] = 0;
      seen_[t] = 0;
    }
  }
  for (int32_t t : prompt_tokens) {
    if (in_vocab(t, vocab)) seen_[t] = 0;
  }
}

void Sampler::select_candidates(std::span<const float> logits) {
  float max_logit = kNegInf;
  for (float l : logits) max_logit = std::max(max_logit, l);
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    // All -inf: equal weights, so the draw stays defined (the caller gets some token).
    const double weight = max_logit == kNegInf ? 1.0 : std::exp(logits[i] - max_logit);
    candidates_.push_back({logits[i], static_cast<int32_t>(i), weight});
  }
  if (params_.top_k > 0) keep_top_k(static_cast<size_t>(params_.top_k));
  if (params_.top_p < 1.f) keep_top_p();
  if (params_.min_p > 0.f) keep_min_p();
}

// Keeps the k most likely candidates, sorted most likely first.
void Sampler::keep_top_k(size_t k) {
  k = std::min(k, candidates_.size());
  if (k < candidates_.size()) {
    std::nth_element(candidates_.begin(), candidates_.begin() + k, candidates_.end(),
                     more_likely<Candidate>);
    candidates_.resize(k);
  }
  std::sort(candidates_.begin(), candidates_.end(), more_likely<Candidate>);
}

// Keeps the smallest most-likely prefix (in more_likely order) whose weight reaches top_p of
// the candidates' total weight. Instead of sorting, the range [lo, hi) known to contain the
// cut is halved with nth_element: if the more likely half [lo, mid) already holds the
// remaining mass, the cut lies in it; otherwise that half is kept whole and the cut lies in
// [mid, hi). Expected O(n); the last few elements are sorted and walked.
void Sampler::keep_top_p() {
  double total = 0;
  for (const Candidate& c : candidates_) total += c.weight;
  double needed = params_.top_p * total;  // mass still to collect from [lo, ...)
  size_t lo = 0, hi = candidates_.size();
  const auto begin = candidates_.begin();
  while (hi - lo > kTopPSortBelow) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(begin + lo, begin + mid, begin + hi, more_likely<Candidate>);
    double mass = 0;
    for (size_t i = lo; i < mid; ++i) mass += candidates_[i].weight;
    if (mass >= needed) {
      hi = mid;
    } else {
      needed -= mass;
      lo = mid;
    }
  }
  std::sort(begin + lo, begin + hi, more_likely<Candidate>);
  for (size_t i = lo; i < hi; ++i) {
    needed -= candidates_[i].weight;
    if (needed <= 0) {
      candidates_.resize(i + 1);
      return;
    }
  }
  candidates_.resize(hi);  // rounding left the mass just short of the target: keep [0, hi)
}

// Keeps candidates with probability >= min_p * max probability.
void Sampler::keep_min_p() {
  float max_logit = kNegInf;
  for (const Candidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  if (max_logit == kNegInf) return;
  const float threshold = max_logit + std::log(params_.min_p);
  std::erase_if(candidates_, [&](const Candidate& c) { return c.logit < threshold; });
}

int32_t Sampler::draw() {
  double total = 0;
  for (const Candidate& c : candidates_) total += c.weight;
  // 53 random bits -> a double uniform in [0, 1), the same on every standard library.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double target = u * total;
  double cumulative = 0;
  for (const Candidate& c : candidates_) {
    cumulative += c.weight;
    if (cumulative > target) return c.token;
  }
  // Rounding put u * total at the very top of the range: the last token of positive weight.
  for (size_t i = candidates_.size(); i-- > 0;) {
    if (candidates_[i].weight > 0) return candidates_[i].token;
  }
  return candidates_.front().token;
}

}  // namespace flashserve::model
