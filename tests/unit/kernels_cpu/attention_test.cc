// attention_naive_cpu and attention_tiled_cpu against a double-precision direct computation
// that reads K/V from contiguous per-sequence arrays (not through the paged cache), on random
// inputs with odd sizes, GQA ratios, chunked-prefill offsets, decode, packed sequences with
// shuffled block tables, both block sizes, and sliding windows (the reference applies the
// rule p - k < W itself, and the cache rows before every query's window hold NaN, so an
// implementation that reads them fails).
//
// Tolerance. Outputs are convex combinations of V rows with |v| <= 1 and fp32 has unit
// roundoff u = 2^-24 ~ 6e-8. The error of an fp32 output element comes from (a) the scores:
// a head_dim-term dot product scaled by softmax_scale, whose rounding error behaves like a
// random walk of about sqrt(head_dim) * u * |terms| (Higham, "Accuracy and Stability",
// sec. 2.8/4.2), and which enters the output multiplied by |v - out| <= 2 through exp(); and
// (b) the P.V and sum reductions over up to 1025 keys, ~ sqrt(num_keys) * u relative to the
// result. With head_dim <= 128, num_keys <= 1025 and |s| <= S that is about
// u * (sqrt(128) * 2 * (S + 1) + 2 * sqrt(1025)) ~ u * (23 (S + 1) + 64). We allow 2x that
// (the max over ~10^6 compared elements sits in the tail of the error distribution), i.e.
//     |out - ref| <= 2 u (23 (S + 1) + 64)      (S = largest |score| of the problem)
// which is ~2e-5 for S ~ 3 and scales up for the "sharp" cases with large scores. The LSE is
// m + log(l): the same score error plus the rounding of log of a sum, so the same bound
// applies in absolute terms. Measured: both implementations stay below 1/8 of it (the max
// error is ~1e-6 for ordinary and ~5e-6 for sharp problems); a bug (wrong mask, lost
// rescale, wrong KV head) gives errors of order 1e-2..1.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/attention_ref.h"
#include "kernels/paged_kv.h"

namespace flashserve::kernels {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kUnitRoundoff = 5.9604644775390625e-8;  // 2^-24

struct SeqShape {
  int q_len;
  int kv_len;
};

struct Case {
  std::string name;
  std::vector<SeqShape> seqs;
  int num_heads = 4;
  int num_kv_heads = 4;
  int head_dim = 64;
  int block_size = kKvBlockSize;
  bool causal = true;
  float q_scale = 1.f;  // > 1 sharpens the softmax (large scores)
  uint32_t seed = 1;
  int window = 0;  // sliding_window (kernels/cpu/attention_ref.h); 0: none
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// One random problem: K/V are written into a NaN-poisoned paged cache through kv_append_cpu
// using a shuffled (non-contiguous) block assignment; the per-sequence contiguous copies feed
// the double-precision reference.
struct Problem {
  Case c;
  int num_tokens = 0;
  int max_blocks_per_seq = 0;
  std::vector<float> q;                   // [num_tokens, num_heads, head_dim]
  std::vector<std::vector<float>> k_seq;  // per seq [kv_len, num_kv_heads, head_dim]
  std::vector<std::vector<float>> v_seq;
  std::vector<float> k_cache, v_cache;    // [num_blocks, num_kv_heads, block_size, head_dim]
  std::vector<int32_t> cu_seqlens_q, seqlens_k, block_tables;

  AttentionCpuParams params(float* out, float* lse) const {
    AttentionCpuParams p;
    p.q = q.data();
    p.k_cache = k_cache.data();
    p.v_cache = v_cache.data();
    p.out = out;
    p.lse = lse;
    p.cu_seqlens_q = cu_seqlens_q.data();
    p.seqlens_k = seqlens_k.data();
    p.block_tables = block_tables.data();
    p.num_seqs = static_cast<int>(c.seqs.size());
    p.num_heads = c.num_heads;
    p.num_kv_heads = c.num_kv_heads;
    p.head_dim = c.head_dim;
    p.block_size = c.block_size;
    p.max_blocks_per_seq = max_blocks_per_seq;
    p.softmax_scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
    p.causal = c.causal;
    p.sliding_window = c.window;
    return p;
  }
};

std::vector<float> random_vector(size_t n, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

int blocks_for(int kv_len, int block_size) { return (kv_len + block_size - 1) / block_size; }

// Assigns physical blocks in the order given by `physical` and writes K/V into the cache.
void fill_cache(Problem& pr, const std::vector<int32_t>& physical) {
  const Case& c = pr.c;
  const int num_seqs = static_cast<int>(c.seqs.size());
  pr.k_cache.assign(physical.size() * c.num_kv_heads * c.block_size * c.head_dim, kNaN);
  pr.v_cache = pr.k_cache;
  pr.block_tables.assign(static_cast<size_t>(num_seqs) * pr.max_blocks_per_seq, -1);
  size_t next = 0;
  for (int s = 0; s < num_seqs; ++s) {
    const int kv_len = c.seqs[s].kv_len;
    std::vector<int32_t> slots(kv_len);
    for (int b = 0; b < blocks_for(kv_len, c.block_size); ++b) {
      pr.block_tables[s * pr.max_blocks_per_seq + b] = physical[next++];
    }
    for (int t = 0; t < kv_len; ++t) {
      slots[t] = pr.block_tables[s * pr.max_blocks_per_seq + t / c.block_size] * c.block_size +
                 t % c.block_size;
    }
    kv_append_cpu(pr.k_seq[s].data(), pr.v_seq[s].data(), slots.data(), kv_len, c.num_kv_heads,
                  c.head_dim, c.block_size, pr.k_cache.data(), pr.v_cache.data());
    // With a window, keys before the first query's window are seen by no query: NaN.
    const int first_position = kv_len - c.seqs[s].q_len;
    const int unseen = c.window > 0 ? std::max(0, first_position - c.window + 1) : 0;
    for (int t = 0; t < std::min(unseen, kv_len); ++t) {
      for (int g = 0; g < c.num_kv_heads; ++g) {
        const int64_t row = kv_cache_offset(slots[t] / c.block_size, g, slots[t] % c.block_size,
                                            c.num_kv_heads, c.block_size, c.head_dim);
        std::fill_n(pr.k_cache.begin() + row, c.head_dim, kNaN);
        std::fill_n(pr.v_cache.begin() + row, c.head_dim, kNaN);
      }
    }
  }
}

Problem make_problem(const Case& c) {
  std::mt19937 rng(c.seed);
  Problem pr;
  pr.c = c;
  pr.cu_seqlens_q.push_back(0);
  int total_blocks = 0;
  for (const SeqShape& s : c.seqs) {
    pr.cu_seqlens_q.push_back(pr.cu_seqlens_q.back() + s.q_len);
    pr.seqlens_k.push_back(s.kv_len);
    const size_t kv_elems = static_cast<size_t>(s.kv_len) * c.num_kv_heads * c.head_dim;
    pr.k_seq.push_back(random_vector(kv_elems, 1.f, rng));
    pr.v_seq.push_back(random_vector(kv_elems, 1.f, rng));
    total_blocks += blocks_for(s.kv_len, c.block_size);
    pr.max_blocks_per_seq = std::max(pr.max_blocks_per_seq, blocks_for(s.kv_len, c.block_size));
  }
  pr.max_blocks_per_seq += 1;  // a spare (unused, -1) entry in every table
  pr.num_tokens = pr.cu_seqlens_q.back();
  pr.q = random_vector(static_cast<size_t>(pr.num_tokens) * c.num_heads * c.head_dim,
                       c.q_scale, rng);
  // 3 spare blocks (left NaN) and a shuffled assignment: tables are non-contiguous.
  std::vector<int32_t> physical(total_blocks + 3);
  std::iota(physical.begin(), physical.end(), 0);
  std::shuffle(physical.begin(), physical.end(), rng);
  fill_cache(pr, physical);
  return pr;
}

struct Reference {
  std::vector<double> out;  // [num_tokens, num_heads, head_dim]
  std::vector<double> lse;  // [num_tokens, num_heads]
  double max_abs_score = 0;
};

// Direct double-precision attention from the contiguous per-sequence K/V.
Reference reference_attention(const Problem& pr) {
  const Case& c = pr.c;
  const int d = c.head_dim, group = c.num_heads / c.num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Reference ref;
  ref.out.assign(static_cast<size_t>(pr.num_tokens) * c.num_heads * d, 0.0);
  ref.lse.assign(static_cast<size_t>(pr.num_tokens) * c.num_heads, 0.0);
  std::vector<double> s;
  for (size_t sq = 0; sq < c.seqs.size(); ++sq) {
    const auto [q_len, kv_len] = c.seqs[sq];
    for (int i = 0; i < q_len; ++i) {
      const int token = pr.cu_seqlens_q[sq] + i;
      const int position = kv_len - q_len + i;
      const int end = c.causal ? position + 1 : kv_len;
      int begin = 0;  // the window: keys k with position - k < W
      while (c.window > 0 && position - begin >= c.window) ++begin;
      for (int h = 0; h < c.num_heads; ++h) {
        const float* q = &pr.q[(static_cast<size_t>(token) * c.num_heads + h) * d];
        const int g = h / group;
        s.assign(kv_len, 0.0);
        double m = -INFINITY;
        for (int j = begin; j < end; ++j) {
          const float* k = &pr.k_seq[sq][(static_cast<size_t>(j) * c.num_kv_heads + g) * d];
          for (int x = 0; x < d; ++x) s[j] += static_cast<double>(q[x]) * k[x];
          s[j] *= scale;
          m = std::max(m, s[j]);
          ref.max_abs_score = std::max(ref.max_abs_score, std::abs(s[j]));
        }
        double l = 0;
        double* out = &ref.out[(static_cast<size_t>(token) * c.num_heads + h) * d];
        for (int j = begin; j < end; ++j) {
          const double pj = std::exp(s[j] - m);
          l += pj;
          const float* v = &pr.v_seq[sq][(static_cast<size_t>(j) * c.num_kv_heads + g) * d];
          for (int x = 0; x < d; ++x) out[x] += pj * v[x];
        }
        for (int x = 0; x < d; ++x) out[x] /= l;
        ref.lse[static_cast<size_t>(token) * c.num_heads + h] = m + std::log(l);
      }
    }
  }
  return ref;
}

double tolerance(const Reference& ref) {
  return 2 * kUnitRoundoff * (23 * (ref.max_abs_score + 1) + 64);
}

struct Errors {
  double out = 0, lse = 0;
};

// Max abs errors against the reference; NaN anywhere fails the test.
Errors compare(const std::vector<float>& out, const std::vector<float>& lse,
               const Reference& ref, const std::string& what) {
  Errors e;
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_FALSE(std::isnan(out[i])) << what << ": out[" << i << "] is NaN";
    if (std::isnan(out[i])) return {INFINITY, INFINITY};
    e.out = std::max(e.out, std::abs(out[i] - ref.out[i]));
  }
  for (size_t i = 0; i < lse.size(); ++i) {
    EXPECT_FALSE(std::isnan(lse[i])) << what << ": lse[" << i << "] is NaN";
    if (std::isnan(lse[i])) return {INFINITY, INFINITY};
    e.lse = std::max(e.lse, std::abs(lse[i] - ref.lse[i]));
  }
  return e;
}

struct Outputs {
  std::vector<float> out, lse;
};

// Runs one implementation on NaN-poisoned outputs.
template <typename Fn>
Outputs run(const Problem& pr, Fn fn) {
  Outputs o;
  o.out.assign(static_cast<size_t>(pr.num_tokens) * pr.c.num_heads * pr.c.head_dim, kNaN);
  o.lse.assign(static_cast<size_t>(pr.num_tokens) * pr.c.num_heads, kNaN);
  fn(pr.params(o.out.data(), o.lse.data()));
  return o;
}

class AttentionCpuTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionCpuTest, NaiveAndTiledMatchDoubleReference) {
  const Problem pr = make_problem(GetParam());
  const Reference ref = reference_attention(pr);
  const double tol = tolerance(ref);
  const Outputs naive = run(pr, [](const AttentionCpuParams& p) { attention_naive_cpu(p); });
  const Errors en = compare(naive.out, naive.lse, ref, "naive");
  EXPECT_LE(en.out, tol) << "naive out";
  EXPECT_LE(en.lse, tol) << "naive lse";
  for (int kv_tile : {1, 16, 64, 100}) {
    const Outputs tiled =
        run(pr, [&](const AttentionCpuParams& p) { attention_tiled_cpu(p, kv_tile); });
    const std::string what = "tiled kv_tile=" + std::to_string(kv_tile);
    const Errors et = compare(tiled.out, tiled.lse, ref, what);
    EXPECT_LE(et.out, tol) << what << " out (naive error " << en.out << ")";
    EXPECT_LE(et.lse, tol) << what << " lse (naive error " << en.lse << ")";
  }
}

std::vector<Case> single_sequence_cases() {
  std::vector<Case> cases;
  struct Heads { int q, kv; };
  uint32_t seed = 100;
  for (int len : {1, 17, 97, 1025}) {
    for (Heads h : {Heads{4, 4}, Heads{9, 3}, Heads{8, 1}}) {
      for (int d : {64, 128}) {
        for (bool causal : {true, false}) {
          // The 1025-length problems are the slow ones (seconds each on a loaded 2-core
          // machine): one block size, and three representative head configurations.
          const bool keep_long = (h.q == 9 && d == 64 && causal) ||
                                 (h.q == 8 && d == 128 && !causal) ||
                                 (h.q == 4 && d == 128 && causal);
          if (len == 1025 && !keep_long) continue;
          for (int bs : len == 1025 ? std::vector<int>{64} : std::vector<int>{64, 16}) {
            Case c;
            c.name = "len" + std::to_string(len) + "_h" + std::to_string(h.q) + "kv" +
                     std::to_string(h.kv) + "_d" + std::to_string(d) +
                     (causal ? "_causal" : "_full") + "_bs" + std::to_string(bs);
            c.seqs = {{len, len}};
            c.num_heads = h.q;
            c.num_kv_heads = h.kv;
            c.head_dim = d;
            c.block_size = bs;
            c.causal = causal;
            c.seed = seed++;
            cases.push_back(c);
          }
        }
      }
    }
  }
  return cases;
}

Case make_case(std::string name, std::vector<SeqShape> seqs, int num_heads, int num_kv_heads,
               int head_dim, int block_size, bool causal, float q_scale, uint32_t seed) {
  return Case{std::move(name), std::move(seqs), num_heads, num_kv_heads, head_dim,
              block_size, causal, q_scale, seed};
}

std::vector<Case> mixed_cases() {
  return {
      make_case("chunk17_after80_h9kv3_d64", {{17, 97}}, 9, 3, 64, 64, true, 1.f, 1),
      make_case("chunk17_after80_h8kv1_d128_bs16", {{17, 97}}, 8, 1, 128, 16, true, 1.f, 2),
      make_case("chunk97_after928_h9kv3_d64", {{97, 1025}}, 9, 3, 64, 64, true, 1.f, 3),
      make_case("decode_kv1025_h9kv3_d64", {{1, 1025}}, 9, 3, 64, 64, true, 1.f, 4),
      make_case("decode_kv17_h8kv1_d128_bs16", {{1, 17}}, 8, 1, 128, 16, true, 1.f, 5),
      make_case("decode_kv1_h4kv4_d64", {{1, 1}}, 4, 4, 64, 64, true, 1.f, 6),
      make_case("packed_h9kv3_d64", {{17, 97}, {1, 1025}, {97, 97}, {1, 17}, {5, 200}}, 9, 3, 64,
                64, true, 1.f, 7),
      make_case("packed_h8kv2_d128_bs16", {{17, 97}, {1, 1025}, {97, 97}, {1, 1}, {33, 64}}, 8, 2,
                128, 16, true, 1.f, 8),
      make_case("packed_full_h6kv2_d64_bs16", {{17, 97}, {1, 33}, {97, 97}}, 6, 2, 64, 16, false,
                1.f, 9),
      make_case("packed_decode_batch_h9kv3_d64", {{1, 97}, {1, 1}, {1, 1025}, {1, 64}, {1, 65}},
                9, 3, 64, 64, true, 1.f, 10),
      // Sequences without queries (and one without keys) packed between others.
      make_case("packed_with_empty_h9kv3_d64", {{17, 97}, {0, 0}, {1, 40}, {0, 50}, {3, 3}}, 9,
                3, 64, 16, true, 1.f, 13),
      // Sharp softmax (scores up to ~100): without max subtraction exp() would overflow.
      make_case("sharp_h9kv3_d64", {{97, 97}, {17, 300}}, 9, 3, 64, 64, true, 12.f, 11),
      make_case("sharp_full_h8kv1_d128_bs16", {{33, 129}}, 8, 1, 128, 16, false, 12.f, 12),
  };
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

Case windowed(Case c, int window) {
  c.name += "_w" + std::to_string(window);
  c.window = window;
  return c;
}

// Sliding windows smaller than, equal to and larger than the sequence, W = 1 (each query sees
// only itself), chunked prefill and decode into a longer cache, packed sequences, both block
// sizes (a window start inside and across blocks) and a sharp softmax.
std::vector<Case> window_cases() {
  return {
      windowed(make_case("len97_h9kv3_d64", {{97, 97}}, 9, 3, 64, 64, true, 1.f, 21), 40),
      windowed(make_case("len97_h8kv2_d128_bs16", {{97, 97}}, 8, 2, 128, 16, true, 1.f, 22), 97),
      windowed(make_case("len97_h4kv4_d64", {{97, 97}}, 4, 4, 64, 64, true, 1.f, 23), 200),
      windowed(make_case("len97_h9kv3_d64_bs16", {{97, 97}}, 9, 3, 64, 16, true, 1.f, 24), 1),
      windowed(make_case("len1025_h9kv3_d64", {{1025, 1025}}, 9, 3, 64, 64, true, 1.f, 25), 300),
      windowed(make_case("chunk97_after928_h9kv3_d64", {{97, 1025}}, 9, 3, 64, 64, true, 1.f, 26),
               130),
      windowed(make_case("chunk17_after80_h8kv1_d128_bs16", {{17, 97}}, 8, 1, 128, 16, true, 1.f,
                         27), 20),
      windowed(make_case("decode_kv1025_h9kv3_d64", {{1, 1025}}, 9, 3, 64, 64, true, 1.f, 28), 64),
      windowed(make_case("packed_h8kv2_d128_bs16",
                         {{17, 97}, {1, 1025}, {97, 97}, {1, 1}, {33, 64}}, 8, 2, 128, 16, true,
                         1.f, 29),
               50),
      windowed(make_case("sharp_h9kv3_d64", {{97, 97}, {17, 300}}, 9, 3, 64, 64, true, 12.f, 30),
               33),
  };
}

INSTANTIATE_TEST_SUITE_P(SingleSequence, AttentionCpuTest,
                         ::testing::ValuesIn(single_sequence_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Mixed, AttentionCpuTest, ::testing::ValuesIn(mixed_cases()),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Window, AttentionCpuTest, ::testing::ValuesIn(window_cases()),
                         case_name);

// The physical placement of blocks must not matter: the same logical K/V under another
// permutation of physical blocks gives bitwise the same outputs.
TEST(AttentionCpu, ResultDoesNotDependOnPhysicalBlockPermutation) {
  Problem pr = make_problem(
      make_case("perm", {{17, 97}, {1, 300}, {40, 40}}, 9, 3, 64, 16, true, 1.f, 42));
  auto naive = [](const AttentionCpuParams& p) { attention_naive_cpu(p); };
  auto tiled = [](const AttentionCpuParams& p) { attention_tiled_cpu(p, 64); };
  const Outputs naive_a = run(pr, naive), tiled_a = run(pr, tiled);
  const int num_physical = static_cast<int>(pr.k_cache.size()) /
                           (pr.c.num_kv_heads * pr.c.block_size * pr.c.head_dim);
  std::vector<int32_t> physical(num_physical);
  std::iota(physical.begin(), physical.end(), 0);
  std::reverse(physical.begin(), physical.end());  // a different placement than make_problem's
  const std::vector<int32_t> old_tables = pr.block_tables;
  fill_cache(pr, physical);
  ASSERT_NE(old_tables, pr.block_tables);
  const Outputs naive_b = run(pr, naive), tiled_b = run(pr, tiled);
  EXPECT_EQ(naive_a.out, naive_b.out);
  EXPECT_EQ(naive_a.lse, naive_b.lse);
  EXPECT_EQ(tiled_a.out, tiled_b.out);
  EXPECT_EQ(tiled_a.lse, tiled_b.lse);
}

// The tiled kernel computes the query heads of a GQA group together, register-blocked over
// heads, keys and output columns (attention_ref.cc); each head's result must be bitwise the
// one it gets alone: one query head over a cache holding only its KV head (a group of one).
// Groups of 3 and 8 (two blocks of 4), head_dim 64, 128 and 72 (a column tail), kv_tile 64,
// 100 (a key tail) and 16.
TEST(AttentionCpu, EachHeadOfAGroupIsBitwiseTheHeadAlone) {
  struct Setup { int h, kv, d, bs, kv_tile; };
  for (Setup su : {Setup{9, 3, 64, 16, 64}, Setup{8, 1, 128, 16, 100}, Setup{8, 2, 72, 64, 16}}) {
    const Problem pr = make_problem(make_case("group", {{97, 97}, {1, 130}, {40, 300}}, su.h,
                                              su.kv, su.d, su.bs, true, 1.f, 77));
    const Outputs all =
        run(pr, [&](const AttentionCpuParams& p) { attention_tiled_cpu(p, su.kv_tile); });
    const int group = su.h / su.kv;
    const size_t num_blocks = pr.k_cache.size() / (su.kv * su.bs * su.d);
    for (int h = 0; h < su.h; ++h) {
      const int g = h / group;
      Problem one = pr;
      one.c.num_heads = 1;
      one.c.num_kv_heads = 1;
      one.q.assign(static_cast<size_t>(pr.num_tokens) * su.d, 0.f);
      for (int t = 0; t < pr.num_tokens; ++t) {
        std::copy_n(pr.q.begin() + (static_cast<size_t>(t) * su.h + h) * su.d, su.d,
                    one.q.begin() + static_cast<size_t>(t) * su.d);
      }
      one.k_cache.assign(num_blocks * su.bs * su.d, 0.f);
      one.v_cache = one.k_cache;
      for (size_t b = 0; b < num_blocks; ++b) {
        for (int row = 0; row < su.bs; ++row) {
          const int64_t src = kv_cache_offset(b, g, row, su.kv, su.bs, su.d);
          const int64_t dst = kv_cache_offset(b, 0, row, 1, su.bs, su.d);
          std::copy_n(pr.k_cache.begin() + src, su.d, one.k_cache.begin() + dst);
          std::copy_n(pr.v_cache.begin() + src, su.d, one.v_cache.begin() + dst);
        }
      }
      const Outputs alone =
          run(one, [&](const AttentionCpuParams& p) { attention_tiled_cpu(p, su.kv_tile); });
      for (int t = 0; t < pr.num_tokens; ++t) {
        for (int c = 0; c < su.d; ++c) {
          ASSERT_EQ(alone.out[static_cast<size_t>(t) * su.d + c],
                    all.out[(static_cast<size_t>(t) * su.h + h) * su.d + c])
              << "h" << su.h << "kv" << su.kv << " head " << h << " token " << t << " col " << c;
        }
        ASSERT_EQ(alone.lse[t], all.lse[static_cast<size_t>(t) * su.h + h]) << "head " << h;
      }
    }
  }
}

// With a caller's pool (its tasks on threads, or one after another in reverse order, as a
// pool whose workers start late runs them) the outputs are bitwise those of the kernel's
// own threads: an item's result does not depend on where or when it runs.
TEST(AttentionCpu, APoolGivesTheSameBitsAsOwnThreads) {
  const Problem pr = make_problem(
      make_case("pool", {{300, 300}, {1, 130}, {97, 200}}, 9, 3, 64, 16, true, 1.f, 78));
  auto own = [](const AttentionCpuParams& p) { attention_tiled_cpu(p, 64); };
  const Outputs want = run(pr, own);
  AttentionPool threads;
  threads.num_threads = 3;
  threads.run = [](void*, int n, void (*task)(void*, int), void* task_ctx) {
    std::vector<std::thread> t;
    for (int i = 0; i < n; ++i) t.emplace_back(task, task_ctx, i);
    for (auto& th : t) th.join();
  };
  AttentionPool reverse;
  reverse.num_threads = 2;
  reverse.run = [](void*, int n, void (*task)(void*, int), void* task_ctx) {
    for (int i = n - 1; i >= 0; --i) task(task_ctx, i);
  };
  for (const AttentionPool* pool : {&threads, &reverse}) {
    const Outputs got =
        run(pr, [pool](const AttentionCpuParams& p) { attention_tiled_cpu(p, 64, pool); });
    EXPECT_EQ(got.out, want.out);
    EXPECT_EQ(got.lse, want.lse);
  }
}

TEST(AttentionCpu, KvAppendWritesSlotsAndSkipsNegativeSlots) {
  const int num_kv_heads = 2, head_dim = 4, block_size = 4, num_blocks = 3;
  std::vector<float> k_cache(num_blocks * num_kv_heads * block_size * head_dim, -1.f);
  std::vector<float> v_cache = k_cache;
  std::vector<float> new_k(3 * num_kv_heads * head_dim), new_v(new_k.size());
  for (size_t i = 0; i < new_k.size(); ++i) {
    new_k[i] = static_cast<float>(i);
    new_v[i] = static_cast<float>(100 + i);
  }
  const std::vector<int32_t> slots = {9, -1, 2};  // block 2 row 1, padding, block 0 row 2
  kv_append_cpu(new_k.data(), new_v.data(), slots.data(), 3, num_kv_heads, head_dim,
                block_size, k_cache.data(), v_cache.data());
  std::vector<float> expected_k(k_cache.size(), -1.f), expected_v(v_cache.size(), -1.f);
  const int src_token[] = {0, 2};
  const int dst_block[] = {2, 0}, dst_row[] = {1, 2};
  for (int t = 0; t < 2; ++t) {
    for (int g = 0; g < num_kv_heads; ++g) {
      for (int x = 0; x < head_dim; ++x) {
        const size_t dst = kv_cache_offset(dst_block[t], g, dst_row[t], num_kv_heads,
                                           block_size, head_dim) + x;
        const size_t src = (src_token[t] * num_kv_heads + g) * head_dim + x;
        expected_k[dst] = new_k[src];
        expected_v[dst] = new_v[src];
      }
    }
  }
  EXPECT_EQ(k_cache, expected_k);
  EXPECT_EQ(v_cache, expected_v);
}

}  // namespace
}  // namespace flashserve::kernels
