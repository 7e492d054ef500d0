#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

namespace flashserve::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool in_vocab(int32_t token, int vocab) { return token >= 0 && token < vocab; }

// log(sum(exp(logits))); -inf when every logit is -inf.
float log_sum_exp(const float* logits, int vocab) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  if (max_logit == kNegInf) return kNegInf;
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(logits[i] - max_logit);
  return static_cast<float>(max_logit + std::log(sum));
}

// Lowest id among the largest values (token 0 when all are -inf).
int32_t argmax(const float* values, int vocab) {
  int32_t best = 0;
  for (int i = 1; i < vocab; ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

void top_logprobs(const float* logits, int vocab, int n, float lse, SampleResult* r) {
  n = std::min(n, vocab);
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int i = 0; i < n; ++i) {
    r->top_tokens[i] = ids[i];
    r->top_logprobs[i] = logits[ids[i]] - lse;
  }
}

float penalised(float l, const SampleSpec& s, int32_t count) {
  if (s.repetition_penalty != 1.f) {
    l = l > 0 ? l / s.repetition_penalty : l * s.repetition_penalty;
  }
  if (count > 0) l -= static_cast<float>(count) * s.frequency_penalty + s.presence_penalty;
  return l == kNegInf ? l : std::clamp(l, -FLT_MAX, FLT_MAX);
}

struct Candidate {
  float z;      // (logit - max) / temperature
  int32_t id;
  double w;     // exp(z)
};

bool more_likely(const Candidate& a, const Candidate& b) {
  return a.z > b.z || (a.z == b.z && a.id < b.id);
}

// Steps 4-8 of kernels/sampling.h on the penalised row.
int32_t draw(const float* logits, int vocab, const SampleSpec& s) {
  const float max_logit = *std::max_element(logits, logits + vocab);
  if (max_logit == kNegInf) return 0;
  std::vector<Candidate> c(vocab);
  for (int i = 0; i < vocab; ++i) {
    const float z = (logits[i] - max_logit) / s.temperature;
    c[i] = {z, i, std::exp(static_cast<double>(z))};
  }
  if (s.top_k > 0 && s.top_k < vocab) {
    std::nth_element(c.begin(), c.begin() + s.top_k, c.end(), more_likely);
    c.resize(s.top_k);
  }
  if (s.top_p < 1.f) {
    std::sort(c.begin(), c.end(), more_likely);
    double total = 0;
    for (const Candidate& x : c) total += x.w;
    const double target = static_cast<double>(s.top_p) * total;
    double cumulative = 0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cumulative += c[i].w;
      if (cumulative >= target) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }
  if (s.min_p > 0.f) {
    const float log_min_p = std::log(s.min_p);
    std::erase_if(c, [&](const Candidate& x) { return x.z < log_min_p; });
  }
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  double total = 0;
  for (const Candidate& x : c) total += x.w;
  const double target = s.uniform * total;
  double cumulative = 0;
  for (const Candidate& x : c) {
    cumulative += x.w;
    if (cumulative > target) return x.id;
  }
  // u * total rounded up to total: the last kept token of positive weight.
  for (size_t i = c.size(); i-- > 0;) {
    if (c[i].w > 0) return c[i].id;
  }
  return c.back().id;
}

}  // namespace

SampleResult sample_row_cpu(float* logits, int vocab, const SampleSpec& s,
                            const int32_t* penalty_tokens, const int32_t* penalty_counts) {
  SampleResult r;
  for (int i = 0; i < vocab; ++i) {
    if (std::isnan(logits[i])) logits[i] = kNegInf;
  }
  const bool need_lse = s.want_logprob != 0 || s.num_top_logprobs > 0;
  const float lse = need_lse ? log_sum_exp(logits, vocab) : 0.f;
  if (s.num_top_logprobs > 0) top_logprobs(logits, vocab, s.num_top_logprobs, lse, &r);

  std::vector<std::pair<int32_t, float>> raw;  // penalised tokens' raw logits
  for (int i = s.penalty_begin; i < s.penalty_end; ++i) {
    const int32_t t = penalty_tokens[i];
    if (!in_vocab(t, vocab)) continue;
    raw.emplace_back(t, logits[t]);
    logits[t] = penalised(logits[t], s, penalty_counts[i]);
  }

  r.token = s.temperature == 0.f ? argmax(logits, vocab) : draw(logits, vocab, s);
  if (s.want_logprob != 0) {
    float raw_logit = logits[r.token];
    for (const auto& [t, l] : raw) {
      if (t == r.token) raw_logit = l;
    }
    r.logprob = lse == kNegInf ? kNegInf : raw_logit - lse;
  }
  return r;
}

void gather_sampled_tokens_cpu(const SampledTokenGather& g) {
  for (int p = 0; p < g.num_pairs; ++p) {
    g.token_ids[g.pairs[2 * p]] = g.results[g.pairs[2 * p + 1]].token;
  }
}

}  // namespace flashserve::kernels
