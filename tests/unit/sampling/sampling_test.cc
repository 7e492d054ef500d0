// model/sampling.h: validation, greedy, penalties, raw logprobs, seeded reproducibility, and
// the filters (top-k, top-p, min-p) checked on exact small distributions with many draws.
// Statistical checks use fixed seeds (the outcome is deterministic, so they cannot flake)
// and bounds of at least 5 standard deviations (they would hold for almost any seed too).
#include "model/sampling.h"

#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace flashserve::model {
namespace {

using ::testing::HasSubstr;

// What a backend does for one sequence: the sampler's next spec, then the CPU reference of
// the sampling kernel on one row of logits ([vocab], modified in place).
SampledToken sample_row(Sampler& sampler, std::span<float> logits,
                        std::span<const int32_t> prompt_tokens,
                        std::span<const int32_t> generated_tokens) {
  std::vector<int32_t> penalty_tokens, penalty_counts;
  const int vocab = static_cast<int>(logits.size());
  const kernels::SampleSpec spec =
      sampler.next_spec(prompt_tokens, generated_tokens, vocab, &penalty_tokens, &penalty_counts);
  const kernels::SampleResult r = kernels::sample_row_cpu(
      logits.data(), vocab, spec, penalty_tokens.data(), penalty_counts.data());
  return to_sampled_token(r, spec, vocab);
}

std::vector<float> log_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::vector<float> random_logits(int vocab, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> l(vocab);
  for (auto& x : l) x = dist(rng);
  return l;
}

// Draws `num_draws` tokens from fresh copies of `logits`; returns counts per token.
std::vector<int> draw_counts(const SamplingParams& params, const std::vector<float>& logits,
                             int num_draws, uint64_t seed) {
  Sampler sampler(params, seed);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < num_draws; ++i) {
    std::vector<float> l = logits;
    ++counts[sample_row(sampler, l, {}, {}).token];
  }
  return counts;
}

// |frequency - p| within 5 standard deviations of a binomial proportion.
void expect_frequency(int count, int num_draws, double p, const char* what) {
  const double sigma = std::sqrt(p * (1 - p) / num_draws);
  EXPECT_NEAR(static_cast<double>(count) / num_draws, p, 5 * sigma) << what;
}

// ---- validate -----------------------------------------------------------------------------

TEST(SamplingValidate, AcceptsDefaultsAndTypicalValues) {
  EXPECT_TRUE(validate(SamplingParams{}).ok());
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.05f;
  p.repetition_penalty = 1.1f;
  p.presence_penalty = -2.f;
  p.frequency_penalty = 2.f;
  p.num_logprobs = 20;
  EXPECT_TRUE(validate(p).ok());
}

TEST(SamplingValidate, RejectsOutOfRangeNamingFieldAndValue) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Bad {
    void (*set)(SamplingParams&);
    const char* field;
    const char* value;
  };
  const Bad bad[] = {
      {[](SamplingParams& p) { p.temperature = -0.5f; }, "temperature", "-0.5"},
      {[](SamplingParams& p) { p.temperature = std::numeric_limits<float>::infinity(); },
       "temperature", "inf"},
      {[](SamplingParams& p) { p.top_k = -1; }, "top_k", "-1"},
      {[](SamplingParams& p) { p.top_p = 0.f; }, "top_p", "0"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "top_p", "1.5"},
      {[](SamplingParams& p) { p.min_p = -0.25f; }, "min_p", "-0.25"},
      {[](SamplingParams& p) { p.min_p = 2.f; }, "min_p", "2"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.f; }, "repetition_penalty", "0"},
      {[](SamplingParams& p) { p.repetition_penalty = -1.f; }, "repetition_penalty", "-1"},
      {[](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty", "2.5"},
      {[](SamplingParams& p) { p.frequency_penalty = -3.f; }, "frequency_penalty", "-3"},
      {[](SamplingParams& p) { p.num_logprobs = 21; }, "num_logprobs", "21"},
      {[](SamplingParams& p) { p.num_logprobs = -1; }, "num_logprobs", "-1"},
  };
  for (const Bad& b : bad) {
    SamplingParams p;
    b.set(p);
    const absl::Status status = validate(p);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << b.field;
    EXPECT_THAT(status.message(), HasSubstr(b.field));
    EXPECT_THAT(status.message(), HasSubstr(b.value)) << status.message();
  }
  SamplingParams p;
  p.top_p = nan;
  EXPECT_THAT(validate(p).message(), HasSubstr("top_p"));
  p = SamplingParams{};
  p.temperature = nan;
  EXPECT_THAT(validate(p).message(), HasSubstr("temperature"));
}

// ---- greedy ---------------------------------------------------------------------------------

TEST(Sampler, GreedyPicksArgmaxWithTiesToLowerId) {
  Sampler sampler(SamplingParams{}, 0);
  std::vector<float> logits = random_logits(49152, 3.f, 1);
  const auto max_it = std::max_element(logits.begin(), logits.end());
  EXPECT_EQ(sample_row(sampler, logits, {}, {}).token, max_it - logits.begin());
  std::vector<float> tie = {0.f, 5.f, 1.f, 5.f, 5.f};
  EXPECT_EQ(sample_row(sampler, tie, {}, {}).token, 1);
}

TEST(Sampler, TopKOneIsArgmaxAtAnyTemperature) {
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  Sampler sampler(p, 99);
  for (uint32_t seed = 0; seed < 50; ++seed) {
    std::vector<float> logits = random_logits(1000, 1.f, seed);
    logits[seed * 7 + 3] = logits[seed * 7 + 5] = 10.f;  // a tie at the top
    EXPECT_EQ(sample_row(sampler, logits, {}, {}).token, static_cast<int32_t>(seed * 7 + 3));
  }
}

// ---- seeding --------------------------------------------------------------------------------

TEST(Sampler, SeededSamplingIsReproducibleAndFallbackSeedIsUsed) {
  SamplingParams p;
  p.temperature = 1.f;
  p.top_p = 0.9f;
  p.seed = 1234;
  p.has_seed = true;
  SamplingParams no_seed = p;
  no_seed.has_seed = false;
  Sampler a(p, 1), b(p, 2), c(no_seed, 1234), d(no_seed, 77);
  std::vector<int32_t> ta, tb, tc, td;
  for (uint32_t i = 0; i < 100; ++i) {
    const std::vector<float> logits = random_logits(5000, 2.f, i);
    for (auto [sampler, tokens] : {std::pair{&a, &ta}, std::pair{&b, &tb}, std::pair{&c, &tc},
                                   std::pair{&d, &td}}) {
      std::vector<float> l = logits;
      tokens->push_back(sample_row(*sampler, l, {}, {}).token);
    }
  }
  EXPECT_EQ(ta, tb);  // params.seed wins over the fallback
  EXPECT_EQ(ta, tc);  // no seed: the fallback seed, same value, same draws
  EXPECT_NE(ta, td);  // another seed, other draws
}

// ---- filters --------------------------------------------------------------------------------

// Pure temperature-1 sampling reproduces the distribution.
TEST(Sampler, TemperatureOneFollowsTheSoftmax) {
  SamplingParams p;
  p.temperature = 1.f;
  const std::vector<double> probs = {0.5, 0.25, 0.15, 0.1};
  const int n = 20000;
  const std::vector<int> counts = draw_counts(p, log_of(probs), n, 5);
  for (size_t t = 0; t < probs.size(); ++t) expect_frequency(counts[t], n, probs[t], "token");
}

// Temperature 2 flattens: p_i proportional to sqrt(probs_i).
TEST(Sampler, TemperatureScalesLogits) {
  SamplingParams p;
  p.temperature = 2.f;
  const std::vector<double> probs = {0.64, 0.16, 0.16, 0.04};  // sqrt: .8 .4 .4 .2 (sum 1.8)
  const int n = 20000;
  const std::vector<int> counts = draw_counts(p, log_of(probs), n, 6);
  const double expected[] = {0.8 / 1.8, 0.4 / 1.8, 0.4 / 1.8, 0.2 / 1.8};
  for (int t = 0; t < 4; ++t) expect_frequency(counts[t], n, expected[t], "token");
}

TEST(Sampler, TopKKeepsOnlyTheKMostLikely) {
  SamplingParams p;
  p.temperature = 1.f;
  p.top_k = 2;
  const std::vector<double> probs = {0.1, 0.4, 0.2, 0.3};  // top 2: tokens 1 and 3
  const int n = 20000;
  const std::vector<int> counts = draw_counts(p, log_of(probs), n, 7);
  EXPECT_EQ(counts[0], 0);
  EXPECT_EQ(counts[2], 0);
  expect_frequency(counts[1], n, 0.4 / 0.7, "token 1");
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  SamplingParams p;
  p.temperature = 1.f;
  p.top_p = 0.7f;  // 0.5 < 0.7 <= 0.5 + 0.25: nucleus {0, 1}
  const std::vector<double> probs = {0.5, 0.25, 0.15, 0.1};
  const int n = 20000;
  const std::vector<int> counts = draw_counts(p, log_of(probs), n, 8);
  EXPECT_EQ(counts[2], 0);
  EXPECT_EQ(counts[3], 0);
  expect_frequency(counts[0], n, 2.0 / 3.0, "token 0");
  p.top_p = 0.4f;  // the top token alone holds 0.5 >= 0.4
  const std::vector<int> only_top = draw_counts(p, log_of(probs), 1000, 9);
  EXPECT_EQ(only_top[0], 1000);
}

// On a full-size vocabulary (the growing-head path), every draw lies in the nucleus found by
// a brute-force full sort.
TEST(Sampler, TopPOnLargeVocabularyDrawsOnlyFromNucleus) {
  const int vocab = 49152;
  const std::vector<float> logits = random_logits(vocab, 2.f, 10);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const float max_logit = logits[order[0]];
  double total = 0;
  for (float l : logits) total += std::exp(double{l} - max_logit);
  for (float top_p : {0.05f, 0.5f, 0.95f}) {
    double cumulative = 0;
    std::vector<bool> in_nucleus(vocab, false);
    for (int32_t t : order) {
      in_nucleus[t] = true;
      cumulative += std::exp(double{logits[t]} - max_logit);
      if (cumulative >= top_p * total) break;
    }
    SamplingParams p;
    p.temperature = 1.f;
    p.top_p = top_p;
    const std::vector<int> counts = draw_counts(p, logits, 300, 11);
    int outside = 0;
    for (int t = 0; t < vocab; ++t) outside += in_nucleus[t] ? 0 : counts[t];
    EXPECT_EQ(outside, 0) << "top_p " << top_p;
  }
}

TEST(Sampler, MinPFiltersRelativeToTheMostLikely) {
  SamplingParams p;
  p.temperature = 1.f;
  p.min_p = 0.2f;  // keep probability >= 0.1: tokens 0, 1, 2
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  const int n = 20000;
  const std::vector<int> counts = draw_counts(p, log_of(probs), n, 12);
  EXPECT_EQ(counts[3], 0);
  expect_frequency(counts[2], n, 0.15 / 0.95, "token 2");
  p.min_p = 0.7f;  // 0.3 < 0.35: only token 0
  EXPECT_EQ(draw_counts(p, log_of(probs), 1000, 13)[0], 1000);
}

// ---- penalties ------------------------------------------------------------------------------

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeOnce) {
  SamplingParams p;
  p.repetition_penalty = 2.f;
  Sampler sampler(p, 0);
  std::vector<float> logits = {4.f, -1.f, 3.f, 0.5f, -2.f};
  const std::vector<int32_t> prompt = {0, 1, 1, 99999, -5};  // repeats and ids out of range
  const std::vector<int32_t> generated = {1, 3, 3};
  sample_row(sampler, logits, prompt, generated);
  EXPECT_EQ(logits, (std::vector<float>{2.f, -2.f, 3.f, 0.25f, -2.f}));
}

TEST(Sampler, FrequencyAndPresencePenaltiesCountGeneratedTokensOnly) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 1.f;
  Sampler sampler(p, 0);
  std::vector<float> logits = {4.f, -1.f, 3.f, 0.5f};
  const std::vector<int32_t> prompt = {0, 2};         // no effect on these penalties
  const std::vector<int32_t> generated = {3, 1, 3, 3};
  sample_row(sampler, logits, prompt, generated);
  // token 1: once -> -1 - 0.5 - 1; token 3: 3 times -> 0.5 - 1.5 - 1.
  EXPECT_EQ(logits, (std::vector<float>{4.f, -2.5f, 3.f, -2.f}));
  // The scratch state is clean: a second call without history changes nothing.
  std::vector<float> again = {4.f, -1.f, 3.f, 0.5f};
  sample_row(sampler, again, {}, {});
  EXPECT_EQ(again, (std::vector<float>{4.f, -1.f, 3.f, 0.5f}));
}

TEST(Sampler, PenaltiesChangeTheGreedyChoice) {
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  Sampler sampler(p, 0);
  std::vector<float> logits = {1.f, 3.f, 2.5f};
  const std::vector<int32_t> generated = {1};
  EXPECT_EQ(sample_row(sampler, logits, {}, generated).token, 2);  // 3 / 1.5 = 2 < 2.5
}

// ---- logprobs -------------------------------------------------------------------------------

TEST(Sampler, LogprobsAreRawLogSoftmaxWithSortedTopList) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.repetition_penalty = 1.3f;
  p.num_logprobs = 5;
  p.seed = 3;
  p.has_seed = true;
  Sampler sampler(p, 0);
  const std::vector<float> raw = random_logits(1000, 2.f, 14);
  double max_logit = *std::max_element(raw.begin(), raw.end()), sum = 0;
  for (float l : raw) sum += std::exp(l - max_logit);
  const double lse = max_logit + std::log(sum);
  std::vector<int32_t> order(raw.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return raw[a] > raw[b]; });
  std::vector<float> logits = raw;
  const std::vector<int32_t> generated = {order[0]};  // penalised, yet logprobs stay raw
  const SampledToken r = sample_row(sampler, logits, {}, generated);
  EXPECT_NEAR(r.logprob, raw[r.token] - lse, 1e-5);
  ASSERT_EQ(r.top_logprobs.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r.top_logprobs[i].first, order[i]);
    EXPECT_NEAR(r.top_logprobs[i].second, raw[order[i]] - lse, 1e-5);
  }
}

TEST(Sampler, NanLogitsAreNeverChosen) {
  Sampler sampler(SamplingParams{}, 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> logits = {nan, 1.f, nan, 2.f};
  const SampledToken r = sample_row(sampler, logits, {}, {});
  EXPECT_EQ(r.token, 3);
  EXPECT_FALSE(std::isnan(r.logprob));
}

// The edges of the accepted domain stay numerically safe (no overflow to inf - inf = NaN).
TEST(Sampler, TinyTemperatureIsGreedyInEffect) {
  SamplingParams p;
  p.temperature = 1e-38f;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = random_logits(1000, 3.f, static_cast<uint32_t>(seed));
    const int32_t best = static_cast<int32_t>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    Sampler sampler(p, seed);
    EXPECT_EQ(sample_row(sampler, logits, {}, {}).token, best) << "seed " << seed;
  }
}

TEST(Sampler, TinyRepetitionPenaltyNeverPoisonsTheDraw) {
  SamplingParams p;
  p.temperature = 1.f;
  p.repetition_penalty = 1e-45f;  // the smallest positive float: divides positives to inf
  std::vector<int32_t> prompt = {5, 7};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits = random_logits(64, 1.f, static_cast<uint32_t>(seed));
    logits[5] = 3.f;   // positive: 3 / 1e-45 overflows, clamped to FLT_MAX
    logits[7] = -2.f;  // negative: multiplied towards zero
    Sampler sampler(p, seed);
    const SampledToken r = sample_row(sampler, logits, prompt, {});
    EXPECT_EQ(r.token, 5) << "seed " << seed;  // the only token of non-zero weight
  }
  p.temperature = 0;
  std::vector<float> logits = random_logits(64, 1.f, 1);
  logits[5] = 3.f;
  Sampler greedy(p, 0);
  EXPECT_EQ(sample_row(greedy, logits, prompt, {}).token, 5);
}

TEST(Sampler, DrawWalksKeptTokensInIdOrder) {
  // Two equally likely tokens: a uniform below 1/2 picks the lower id, above it the higher.
  SamplingParams p;
  p.temperature = 1.f;
  std::vector<int32_t> tokens, counts;
  Sampler sampler(p, 3);
  int low = 0, high = 0;
  for (int i = 0; i < 200; ++i) {
    kernels::SampleSpec spec = sampler.next_spec({}, {}, 4, &tokens, &counts);
    std::vector<float> logits = {-1e30f, 0.f, -1e30f, 0.f};
    const int32_t t = kernels::sample_row_cpu(logits.data(), 4, spec, tokens.data(),
                                              counts.data()).token;
    EXPECT_EQ(t, spec.uniform < 0.5 ? 1 : 3) << "uniform " << spec.uniform;
    (spec.uniform < 0.5 ? low : high) += 1;
  }
  EXPECT_GT(low, 0);
  EXPECT_GT(high, 0);
}

}  // namespace
}  // namespace flashserve::model
