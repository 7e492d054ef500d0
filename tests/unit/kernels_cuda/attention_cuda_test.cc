// The CUDA attention kernels against the fp32 CPU reference (kernels/cpu/attention_ref.h).
//
// Tolerance policy (docs/design.md): on fresh random inputs, the max abs error of a fused kernel
// against fp32 must be at most 2x the max abs error of the naive unfused GPU kernel in the
// same precision on the same inputs (plus 1e-6, far below one bf16/fp16 ulp of the outputs,
// so that a naive error of exactly 0 does not demand bit-exactness). The naive kernel itself
// must stay within 8 units of roundoff of its dtype (relative L2), so the yardstick cannot
// silently degrade. Outputs and LSE are poisoned with NaN before each launch; any non-finite
// value where the reference is finite fails. Cache rows no sequence owns hold NaN.
//
// Sliding windows (Window* suites): W = 1, a window equal to one of the sequences, a few in
// between and one past every sequence, on each prefill path the automatic choice can pick
// (with a sequence past 1k) and on split decode; the blocks wholly before every window
// hold NaN and are named in no block table (attention_problem.h), so a kernel that reads
// them fails.
//
// Without a GPU every test that launches a kernel is skipped (ctest reports "Skipped").
// FLASHSERVE_TEST_MAX_LEN caps sequence lengths (the compute-sanitizer runs use 97).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <tuple>

#include "kernels/attention/attention.h"
#include "kernels/device.h"
#include "kernels/quant/quant_gemv.h"
#include "tests/unit/kernels_cuda/attention_problem.h"

namespace flashserve::kernels {
namespace {

using testing::compare;
using testing::device_is_hopper;
using testing::DeviceBuffer;
using testing::ErrorStats;
using testing::Problem;
using testing::ProblemShape;

int max_len() {
  const char* env = std::getenv("FLASHSERVE_TEST_MAX_LEN");
  return env != nullptr ? std::atoi(env) : 1 << 30;
}
std::vector<int> capped(std::vector<int> lens) {
  for (int& l : lens) l = std::min(l, max_len());
  return lens;
}
uint32_t fresh_seed() { return std::random_device{}(); }

double unit_roundoff(DType t) { return t == DType::kBf16 ? 0x1p-8 : 0x1p-11; }

struct Outputs {
  std::vector<float> out, lse;
};

// Runs `launch(out, lse)` on poisoned buffers and returns what it wrote.
template <typename Launch>
Outputs run_poisoned(const Problem& pr, size_t rows, Launch launch) {
  DeviceBuffer out(rows * pr.shape.num_heads * pr.shape.head_dim * 2);
  DeviceBuffer lse(rows * pr.shape.num_heads * sizeof(float));
  out.poison();
  lse.poison();
  const absl::Status status = launch(out.get(), lse.get<float>());
  EXPECT_TRUE(status.ok()) << status;
  FS_CUDA_OR_DIE(cudaDeviceSynchronize());
  return {pr.download_out(out), lse.to_host<float>()};
}

Outputs run_naive(const Problem& pr, const AttentionParams& base) {
  AttentionParams p = base;
  DeviceBuffer ws(attention_naive_workspace_bytes(p));
  return run_poisoned(pr, pr.num_tokens, [&](void* out, float* lse) {
    p.out = out;
    p.lse = lse;
    return attention_naive(p, ws.get(), ws.bytes(), nullptr);
  });
}

// The fused result against fp32, with the naive kernel's error as the yardstick.
void expect_within_naive(const Problem& pr, const Outputs& fused, const Outputs& naive,
                         const std::string& what) {
  std::vector<float> ref_out, ref_lse;
  pr.reference(ref_out, ref_lse);
  const ErrorStats naive_out = compare(naive.out, ref_out);
  const ErrorStats naive_lse = compare(naive.lse, ref_lse);
  const ErrorStats out = compare(fused.out, ref_out);
  const ErrorStats lse = compare(fused.lse, ref_lse);
  const double u = unit_roundoff(pr.shape.dtype);
  SCOPED_TRACE(what);
  EXPECT_EQ(naive_out.non_finite, 0u);
  EXPECT_LE(naive_out.rel_l2, 8 * u) << "naive yardstick degraded";
  EXPECT_EQ(out.non_finite, 0u) << "non-finite outputs (unwritten poison or NaN)";
  EXPECT_EQ(lse.non_finite, 0u) << "non-finite LSE";
  EXPECT_LE(out.max_abs, 2 * naive_out.max_abs + 1e-6)
      << "out: fused max abs err " << out.max_abs << " vs naive " << naive_out.max_abs
      << " (fused rel L2 " << out.rel_l2 << ", naive " << naive_out.rel_l2 << ")";
  EXPECT_LE(lse.max_abs, 2 * naive_lse.max_abs + 1e-6)
      << "lse: fused " << lse.max_abs << " vs naive " << naive_lse.max_abs;
  std::printf("  %-44s out max|err| %.3g (naive %.3g) relL2 %.3g (naive %.3g); lse %.3g (naive %.3g)\n",
              what.c_str(), out.max_abs, naive_out.max_abs, out.rel_l2, naive_out.rel_l2,
              lse.max_abs, naive_lse.max_abs);
}

// ---- prefill ------------------------------------------------------------------------------

bool needs_hopper(PrefillImpl impl) {
  return impl == PrefillImpl::kHopper || impl == PrefillImpl::kHopperPersistent;
}

const char* impl_prefix(PrefillImpl impl) {
  switch (impl) {
    case PrefillImpl::kHopper: return "wgmma_";
    case PrefillImpl::kHopperPersistent: return "wgmmaps_";
    case PrefillImpl::kPortable: return "mmasync_";
    default: return "auto_";
  }
}

// (implementation, dtype, head_dim, causal, GQA ratio, chunked)
using PrefillCase = std::tuple<PrefillImpl, DType, int, bool, int, bool>;
class PrefillTest : public ::testing::TestWithParam<PrefillCase> {};

// The fused prefill with `impl` (in num_splits key splits, the workspace poisoned) against the
// reference, on a fresh random problem of shape s. Unsplit, with_workspace gives the call its
// optional workspace (attention_prefill_workspace_bytes: a non-causal call's stream-K walk,
// v31) or none (attention_prefill(p, stream)).
void check_prefill(ProblemShape s, PrefillImpl impl, int num_splits = 1,
                   bool with_workspace = true) {
  for (size_t i = 0; i < s.q_lens.size(); ++i) s.q_lens[i] = std::min(s.q_lens[i], s.kv_lens[i]);
  const uint32_t seed = fresh_seed();
  const Problem pr(s, seed);
  AttentionParams base = pr.params(nullptr, nullptr);
  base.prefill_impl = impl;
  DeviceBuffer ws(std::max<size_t>(attention_prefill_workspace_bytes(base, num_splits), 1));
  ws.poison();
  const Outputs fused = run_poisoned(pr, pr.num_tokens, [&](void* out, float* lse) {
    AttentionParams p = base;
    p.out = out;
    p.lse = lse;
    return num_splits == 1 && !with_workspace
               ? attention_prefill(p, nullptr)
               : attention_prefill(p, num_splits, ws.get(), ws.bytes(), nullptr);
  });
  expect_within_naive(pr, fused, run_naive(pr, base),
                      "seed " + std::to_string(seed) + " splits " + std::to_string(num_splits) +
                          (with_workspace ? "" : " no workspace"));
}

void run_prefill_case(const PrefillCase& param, int num_splits = 1) {
  const auto [impl, dtype, head_dim, causal, ratio, chunked] = param;
  ProblemShape s;
  s.dtype = dtype;
  s.head_dim = head_dim;
  s.causal = causal;
  s.num_kv_heads = 2;
  s.num_heads = 2 * ratio;
  if (chunked) {  // queries after cached prefixes (chunked prefill, prefix reuse)
    s.q_lens = capped({1, 17, 33, 128, 64});
    s.kv_lens = capped({17, 97, 1025, 300, 64});
  } else {
    s.q_lens = capped({1, 17, 97, 1025});
    s.kv_lens = s.q_lens;
  }
  check_prefill(s, impl, num_splits);
}

TEST_P(PrefillTest, MatchesReferenceWithinNaiveError) {
  SKIP_WITHOUT_GPU();
  const PrefillImpl impl = std::get<0>(GetParam());
  if (needs_hopper(impl) && !device_is_hopper()) GTEST_SKIP() << "not a Hopper GPU";
  run_prefill_case(GetParam());
}

std::string prefill_name(const ::testing::TestParamInfo<PrefillCase>& info) {
  const auto [impl, dtype, head_dim, causal, ratio, chunked] = info.param;
  return std::string(impl_prefix(impl)) +
         testing::dtype_name(dtype) + "_d" + std::to_string(head_dim) +
         (causal ? "_causal" : "_full") + "_gqa" + std::to_string(ratio) +
         (chunked ? "_chunked" : "_varlen");
}

INSTANTIATE_TEST_SUITE_P(All, PrefillTest,
                         ::testing::Combine(::testing::Values(PrefillImpl::kPortable,
                                                              PrefillImpl::kHopper,
                                                              PrefillImpl::kHopperPersistent,
                                                              PrefillImpl::kAuto),
                                            ::testing::Values(DType::kBf16, DType::kFp16),
                                            ::testing::Values(64, 128), ::testing::Bool(),
                                            ::testing::Values(1, 3, 8), ::testing::Bool()),
                         prefill_name);

// Split prefill: each row block's key tiles in num_splits parts, merged by LSE. 7 splits leave
// the short sequences' row blocks (1-3 tiles) with empty splits, and split the 1,025-key ones
// into 2-tile parts whose first warpgroup rows see none of some parts' keys (causal). kAuto
// too: where it picks the portable kernel (or on another GPU) the splits are not used.
// (implementation, dtype, head_dim, causal, chunked, num_splits)
using SplitPrefillCase = std::tuple<PrefillImpl, DType, int, bool, bool, int>;
class SplitPrefillTest : public ::testing::TestWithParam<SplitPrefillCase> {};

TEST_P(SplitPrefillTest, MatchesReferenceWithinNaiveError) {
  SKIP_WITHOUT_GPU();
  const auto [impl, dtype, head_dim, causal, chunked, num_splits] = GetParam();
  if (impl == PrefillImpl::kHopper && !device_is_hopper()) GTEST_SKIP() << "not a Hopper GPU";
  run_prefill_case({impl, dtype, head_dim, causal, 3, chunked}, num_splits);
}

std::string split_prefill_name(const ::testing::TestParamInfo<SplitPrefillCase>& info) {
  const auto [impl, dtype, head_dim, causal, chunked, num_splits] = info.param;
  return prefill_name({{impl, dtype, head_dim, causal, 3, chunked}, info.index}) + "_s" +
         std::to_string(num_splits);
}

INSTANTIATE_TEST_SUITE_P(All, SplitPrefillTest,
                         ::testing::Combine(::testing::Values(PrefillImpl::kHopper,
                                                              PrefillImpl::kAuto),
                                            ::testing::Values(DType::kBf16, DType::kFp16),
                                            ::testing::Values(64, 128), ::testing::Bool(),
                                            ::testing::Bool(), ::testing::Values(2, 7)),
                         split_prefill_name);

// The persistent kernel's walks past many tiles a CTA (v25, v26): 32 heads over 8 sequences
// of 1-1,100 queries are ~9 x 32 x 8 row blocks (d128), so each of <= 132 CTAs walks ~10-20
// of them, most of them partial or empty in the varlen list; the K/V rings, both Q buffers and
// the TMA-stored outputs go round many times, and a tile of no keys cannot occur here. Both
// walks (v30): the counter walk on these calls of more than 512 keys, the static walk on the
// same shapes with every length capped at 512.
TEST(PersistentPrefillTest, LongWalksMatchTheReference) {
  SKIP_WITHOUT_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "not a Hopper GPU";
  for (int max_keys : {2000, 512}) {
    for (int head_dim : {64, 128}) {
      for (bool causal : {false, true}) {
        for (bool chunked : {false, true}) {
          SCOPED_TRACE("d" + std::to_string(head_dim) + (causal ? " causal" : " full") +
                       (chunked ? " chunked" : " varlen") + " keys <= " +
                       std::to_string(max_keys));
          ProblemShape s;
          s.head_dim = head_dim;
          s.causal = causal;
          s.num_heads = 32;
          s.num_kv_heads = 8;
          s.q_lens = {1100, 1, 512, 300, 1024, 64, 700, 129};
          s.kv_lens = chunked ? std::vector<int>{1600, 90, 512, 2000, 1024, 64, 1300, 900}
                              : s.q_lens;
          for (size_t i = 0; i < s.q_lens.size(); ++i) {
            s.kv_lens[i] = std::min(s.kv_lens[i], max_keys);
            s.q_lens[i] = std::min(s.q_lens[i], s.kv_lens[i]);
          }
          check_prefill(s, PrefillImpl::kHopperPersistent);
          // Without the workspace a non-causal call walks as a causal one (static / counter).
          if (!causal) check_prefill(s, PrefillImpl::kHopperPersistent, 1, false);
        }
      }
    }
  }
}

// v26: the counter walk (calls of more than 512 keys) takes its tiles from a device-wide
// counter that the launch's last take sets back to 0. Calls back to back (different shapes,
// so different list lengths and grids) each run every tile: a counter left past 0 would end
// the next call's walks early and leave its output poisoned, one left short would run tiles
// twice or skip some. A static-walk call (at most 512 keys) between them must leave the
// counter alone.
TEST(PersistentPrefillTest, CallsBackToBackEachRunEveryTile) {
  SKIP_WITHOUT_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "not a Hopper GPU";
  ProblemShape a;
  a.head_dim = 128;
  a.causal = true;
  a.num_heads = 32;
  a.num_kv_heads = 8;
  a.q_lens = {700, 1, 512, 300};
  a.kv_lens = a.q_lens;
  ProblemShape b = a;
  b.head_dim = 64;
  b.q_lens = {1100, 64, 129};
  b.kv_lens = {1600, 64, 900};
  ProblemShape c = a;
  c.q_lens = {512, 1, 300};
  c.kv_lens = c.q_lens;
  const Problem pa(a, fresh_seed()), pb(b, fresh_seed()), pc(c, fresh_seed());
  auto run = [&](const Problem& pr) {
    AttentionParams base = pr.params(nullptr, nullptr);
    base.prefill_impl = PrefillImpl::kHopperPersistent;
    return run_poisoned(pr, pr.num_tokens, [&](void* out, float* lse) {
      AttentionParams p = base;
      p.out = out;
      p.lse = lse;
      return attention_prefill(p, nullptr);
    });
  };
  const Outputs first_a = run(pa), first_b = run(pb), first_c = run(pc);
  expect_within_naive(pa, first_a, run_naive(pa, pa.params(nullptr, nullptr)), "a");
  expect_within_naive(pb, first_b, run_naive(pb, pb.params(nullptr, nullptr)), "b");
  expect_within_naive(pc, first_c, run_naive(pc, pc.params(nullptr, nullptr)), "c");
  for (int i = 0; i < 3; ++i) {
    const Outputs again_a = run(pa), again_c = run(pc), again_b = run(pb);
    EXPECT_EQ(again_c.out, first_c.out) << "call " << i;
    EXPECT_EQ(again_a.out, first_a.out) << "call " << i;
    EXPECT_EQ(again_a.lse, first_a.lse) << "call " << i;
    EXPECT_EQ(again_b.out, first_b.out) << "call " << i;
    EXPECT_EQ(again_b.lse, first_b.lse) << "call " << i;
  }
}

// v31, v32: the stream-K walk (kHopperPersistent at head_dim 128, non-causal, no window, more
// than 512 keys, given the workspace) runs whole rounds of tiles, then cuts the tiles left over
// into key-tile pieces over all the CTAs; a tile's first piece merges the others' partials,
// handed over through flags that must be 0 again after every launch. On a 132-SM GPU the shapes
// leave 12 tiles of 9 key tiles in 1-unit pieces over 108 CTAs (each tile merged from 9
// pieces), no tile left (one whole round), 24 tiles of 6 key tiles of which the second
// sequence's hold 3 (the pieces past them clipped away) and its last row blocks none, and a
// chunked call. Each call twice: the same bits (a flag left set would let a merge read a
// partial before it is written). At d64 the same calls run the counter walk.
TEST(PersistentPrefillTest, StreamKPiecesMatchTheReference) {
  SKIP_WITHOUT_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "not a Hopper GPU";
  struct Case { int heads; std::vector<int> q_lens, kv_lens; };
  const std::vector<Case> cases = {{16, {1100}, {1100}},
                                   {11, {512, 512, 512}, {640, 640, 640}},
                                   {24, {700, 300}, {700, 300}},
                                   {8, {64, 200, 1}, {1500, 900, 7}}};
  for (int head_dim : {128, 64}) {
    for (const Case& c : cases) {
      SCOPED_TRACE("d" + std::to_string(head_dim) + " h" + std::to_string(c.heads) + " seqs " +
                   std::to_string(c.q_lens.size()) + " first q " + std::to_string(c.q_lens[0]));
      ProblemShape s;
      s.head_dim = head_dim;
      s.causal = false;
      s.num_heads = c.heads;
      s.num_kv_heads = c.heads;
      s.q_lens = c.q_lens;
      s.kv_lens = c.kv_lens;
      const Problem pr(s, fresh_seed());
      AttentionParams base = pr.params(nullptr, nullptr);
      base.prefill_impl = PrefillImpl::kHopperPersistent;
      const size_t bytes = attention_prefill_workspace_bytes(base, 1);
      EXPECT_EQ(bytes > 0, head_dim == 128);  // the stream-K slots, d128 only
      DeviceBuffer ws(std::max<size_t>(bytes, 1));
      ws.poison();
      auto run = [&] {
        return run_poisoned(pr, pr.num_tokens, [&](void* out, float* lse) {
          AttentionParams p = base;
          p.out = out;
          p.lse = lse;
          return attention_prefill(p, 1, ws.get(), ws.bytes(), nullptr);
        });
      };
      const Outputs first = run();
      expect_within_naive(pr, first, run_naive(pr, pr.params(nullptr, nullptr)), "stream-K");
      const Outputs again = run();
      EXPECT_EQ(again.out, first.out);
      EXPECT_EQ(again.lse, first.lse);
    }
  }
}

// ---- decode -------------------------------------------------------------------------------

// (dtype, head_dim, GQA ratio, num_splits; 0 = the heuristic)
using DecodeCase = std::tuple<DType, int, int, int>;
class DecodeTest : public ::testing::TestWithParam<DecodeCase> {};

// Split decode (splits > 0, or the heuristic) against the reference on a fresh problem of
// shape s (one query per sequence).
void check_decode(const ProblemShape& s, int splits) {
  const uint32_t seed = fresh_seed();
  const Problem pr(s, seed);
  const AttentionParams base = pr.params(nullptr, nullptr);
  int device_sms = 0;
  FS_CUDA_OR_DIE(cudaDeviceGetAttribute(&device_sms, cudaDevAttrMultiProcessorCount, 0));
  const int num_splits =
      splits > 0 ? splits
                 : attention_decode_num_splits(base.num_seqs, base.num_kv_heads,
                                               base.max_seqlen_k, device_sms, base.sliding_window);
  DeviceBuffer ws(attention_decode_workspace_bytes(base, num_splits));
  ws.poison();
  const Outputs fused = run_poisoned(pr, pr.num_tokens, [&](void* out, float* lse) {
    AttentionParams p = base;
    p.out = out;
    p.lse = lse;
    return attention_decode(p, num_splits, ws.get(), ws.bytes(), nullptr);
  });
  expect_within_naive(pr, fused, run_naive(pr, base),
                      "splits " + std::to_string(num_splits) + " seed " + std::to_string(seed));
}

ProblemShape decode_shape(DType dtype, int head_dim, int ratio) {
  ProblemShape s;
  s.dtype = dtype;
  s.head_dim = head_dim;
  s.num_kv_heads = ratio == 3 ? 3 : 2;  // 9/3 is SmolLM2-135M's shape
  s.num_heads = s.num_kv_heads * ratio;
  s.kv_lens = capped({1, 17, 97, 1025, 4000, 64});
  s.q_lens.assign(s.kv_lens.size(), 1);
  return s;
}

TEST_P(DecodeTest, MatchesReferenceWithinNaiveError) {
  SKIP_WITHOUT_GPU();
  const auto [dtype, head_dim, ratio, splits] = GetParam();
  check_decode(decode_shape(dtype, head_dim, ratio), splits);
}

std::string decode_name(const ::testing::TestParamInfo<DecodeCase>& info) {
  const auto [dtype, head_dim, ratio, splits] = info.param;
  return std::string(testing::dtype_name(dtype)) + "_d" + std::to_string(head_dim) + "_gqa" +
         std::to_string(ratio) + "_splits" + (splits > 0 ? std::to_string(splits) : "auto");
}

INSTANTIATE_TEST_SUITE_P(All, DecodeTest,
                         ::testing::Combine(::testing::Values(DType::kBf16, DType::kFp16),
                                            ::testing::Values(64, 128),
                                            ::testing::Values(1, 3, 8), ::testing::Values(1, 3, 0)),
                         decode_name);

// ---- sliding window --------------------------------------------------------------------------

std::string window_name(int window) { return "_w" + std::to_string(window); }

// (implementation, dtype, head_dim, window, chunked)
using WindowPrefillCase = std::tuple<PrefillImpl, DType, int, int, bool>;
class WindowPrefillTest : public ::testing::TestWithParam<WindowPrefillCase> {};

void check_window_prefill(const WindowPrefillCase& param, int num_splits = 1) {
  const auto [impl, dtype, head_dim, window, chunked] = param;
  ProblemShape s;
  s.dtype = dtype;
  s.head_dim = head_dim;
  s.num_kv_heads = 2;
  s.num_heads = 6;
  s.sliding_window = window;
  if (chunked) {  // chunks of new queries over a paged cache already holding keys
    s.q_lens = capped({1, 17, 33, 300, 64, 512});
    s.kv_lens = capped({17, 97, 1025, 300, 64, 2000});
  } else {
    s.q_lens = capped({1, 17, 97, 1100});
    s.kv_lens = s.q_lens;
  }
  check_prefill(s, impl, num_splits);
}

TEST_P(WindowPrefillTest, MatchesReferenceWithinNaiveError) {
  SKIP_WITHOUT_GPU();
  if (needs_hopper(std::get<0>(GetParam())) && !device_is_hopper()) {
    GTEST_SKIP() << "not a Hopper GPU";
  }
  check_window_prefill(GetParam());
}

// The window with split prefill: splits share the tiles from the window's first on, so
// some rows see no key of a split (before their window) and the blocks before every window
// stay unread.
TEST(SplitWindowPrefillTest, MatchesReferenceWithinNaiveError) {
  SKIP_WITHOUT_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "not a Hopper GPU";
  for (int head_dim : {64, 128}) {
    for (int window : {97, 300, 1100}) {
      for (bool chunked : {false, true}) {
        SCOPED_TRACE("d" + std::to_string(head_dim) + window_name(window) +
                     (chunked ? " chunked" : " varlen"));
        check_window_prefill({PrefillImpl::kHopper, DType::kBf16, head_dim, window, chunked}, 3);
      }
    }
  }
}

std::string window_prefill_name(const ::testing::TestParamInfo<WindowPrefillCase>& info) {
  const auto [impl, dtype, head_dim, window, chunked] = info.param;
  return std::string(impl_prefix(impl)) + testing::dtype_name(dtype) + "_d" + std::to_string(head_dim) +
         window_name(window) + (chunked ? "_chunked" : "_varlen");
}

// W = 97 and 1100 equal a sequence's length, 4096 exceeds every one. The masking does not
// depend on the dtype: fp16 at one window.
INSTANTIATE_TEST_SUITE_P(All, WindowPrefillTest,
                         ::testing::Combine(::testing::Values(PrefillImpl::kPortable,
                                                              PrefillImpl::kHopper,
                                                              PrefillImpl::kHopperPersistent,
                                                              PrefillImpl::kAuto),
                                            ::testing::Values(DType::kBf16),
                                            ::testing::Values(64, 128),
                                            ::testing::Values(1, 97, 300, 1100, 4096),
                                            ::testing::Bool()),
                         window_prefill_name);
INSTANTIATE_TEST_SUITE_P(Fp16, WindowPrefillTest,
                         ::testing::Combine(::testing::Values(PrefillImpl::kPortable,
                                                              PrefillImpl::kHopper,
                                                              PrefillImpl::kAuto),
                                            ::testing::Values(DType::kFp16),
                                            ::testing::Values(64, 128), ::testing::Values(300),
                                            ::testing::Bool()),
                         window_prefill_name);

// (dtype, head_dim, GQA ratio, num_splits; 0 = the heuristic, window)
using WindowDecodeCase = std::tuple<DType, int, int, int, int>;
class WindowDecodeTest : public ::testing::TestWithParam<WindowDecodeCase> {};

TEST_P(WindowDecodeTest, MatchesReferenceWithinNaiveError) {
  SKIP_WITHOUT_GPU();
  const auto [dtype, head_dim, ratio, splits, window] = GetParam();
  ProblemShape s = decode_shape(dtype, head_dim, ratio);
  s.sliding_window = window;
  check_decode(s, splits);
}

std::string window_decode_name(const ::testing::TestParamInfo<WindowDecodeCase>& info) {
  const auto [dtype, head_dim, ratio, splits, window] = info.param;
  return std::string(testing::dtype_name(dtype)) + "_d" + std::to_string(head_dim) + "_gqa" +
         std::to_string(ratio) + "_splits" + (splits > 0 ? std::to_string(splits) : "auto") +
         window_name(window);
}

// W = 1025 equals a context; 5000 exceeds every one; fp16 at one window.
INSTANTIATE_TEST_SUITE_P(All, WindowDecodeTest,
                         ::testing::Combine(::testing::Values(DType::kBf16),
                                            ::testing::Values(64, 128), ::testing::Values(3, 8),
                                            ::testing::Values(1, 3, 0),
                                            ::testing::Values(1, 100, 1025, 5000)),
                         window_decode_name);
INSTANTIATE_TEST_SUITE_P(Fp16, WindowDecodeTest,
                         ::testing::Combine(::testing::Values(DType::kFp16),
                                            ::testing::Values(64, 128), ::testing::Values(3, 8),
                                            ::testing::Values(3), ::testing::Values(100)),
                         window_decode_name);

// round_q8_out's check: run(out, round) writes the attention output into `out`, rounded for
// the O projection's native GEMM when `round`; the rounded output must have the bits of the
// plain one followed by round_activations_q8, and the rounding must be visible (it differs
// from the plain output somewhere, so a flag that did nothing would fail).
template <typename Run>
void expect_rounded_output_is_plain_rounded(const Problem& pr, size_t row, Run run) {
  DeviceBuffer plain(pr.num_tokens * row * 2), fused(pr.num_tokens * row * 2);
  ASSERT_TRUE(run(plain.get(), false).ok());
  FS_CUDA_OR_DIE(cudaDeviceSynchronize());
  const std::vector<uint16_t> unrounded = plain.to_host<uint16_t>();
  ASSERT_TRUE(round_activations_q8(plain.get(), pr.num_tokens, int64_t(row), nullptr).ok());
  ASSERT_TRUE(run(fused.get(), true).ok());
  FS_CUDA_OR_DIE(cudaDeviceSynchronize());
  const std::vector<uint16_t> want = plain.to_host<uint16_t>();
  const std::vector<uint16_t> got = fused.to_host<uint16_t>();
  size_t mismatches = 0, changed = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    mismatches += got[i] != want[i];
    changed += want[i] != unrounded[i];
  }
  EXPECT_EQ(mismatches, 0u) << "of " << want.size() << " outputs";
  EXPECT_GT(changed, want.size() / 4) << "the rounding left almost every output as it was";
}

// round_q8_out (the O projection's native GEMM input rounded by the decode kernels): the
// same bits as the plain decode followed by round_activations_q8, with one split (the decode
// kernel rounds) and with four (the combine kernel does), at both head_dims and the GQA
// groups of SmolLM2 (3) and Llama (4).
TEST(DecodeRoundQ8Test, RoundedOutputIsThePlainOutputRoundedAfterwards) {
  SKIP_WITHOUT_GPU();
  for (int head_dim : {64, 128}) {
    for (int ratio : {3, 4}) {
      for (int splits : {1, 4}) {
        const uint32_t seed = fresh_seed();
        SCOPED_TRACE("d" + std::to_string(head_dim) + " gqa" + std::to_string(ratio) +
                     " splits " + std::to_string(splits) + " seed " + std::to_string(seed));
        const Problem pr(decode_shape(DType::kBf16, head_dim, ratio), seed);
        const AttentionParams p = pr.params(nullptr, nullptr);
        DeviceBuffer ws(attention_decode_workspace_bytes(p, splits));
        expect_rounded_output_is_plain_rounded(
            pr, size_t(p.num_heads) * head_dim, [&](void* out, bool round) {
              AttentionParams q = p;
              q.out = out;
              q.round_q8_out = round;
              return attention_decode(q, splits, ws.get(), ws.bytes(), nullptr);
            });
      }
    }
  }
}

// round_q8_out in the prefill kernels (a prefill or mixed step's O projection input): the same
// bits as the plain prefill followed by round_activations_q8, for each kernel kAuto can pick,
// at both head_dims, causal with cached prefixes (chunked prefill: the rows a mixed step
// holds) and a sequence past 1k, with rows past a sequence's end in the last tile (their
// quads round values never stored).
TEST(PrefillRoundQ8Test, RoundedOutputIsThePlainOutputRoundedAfterwards) {
  SKIP_WITHOUT_GPU();
  for (PrefillImpl impl : {PrefillImpl::kPortable, PrefillImpl::kHopper}) {
    if (impl == PrefillImpl::kHopper && !device_is_hopper()) continue;
    for (int head_dim : {64, 128}) {
      const uint32_t seed = fresh_seed();
      SCOPED_TRACE(std::string(impl == PrefillImpl::kHopper ? "wgmma" : "mma.sync") + " d" +
                   std::to_string(head_dim) + " seed " + std::to_string(seed));
      ProblemShape shape;
      shape.dtype = DType::kBf16;
      shape.head_dim = head_dim;
      shape.num_heads = 9;
      shape.num_kv_heads = 3;
      shape.q_lens = {1, 17, 33, 128, 1100};
      shape.kv_lens = {17, 97, 1025, 300, 1100};
      const Problem pr(shape, seed);
      AttentionParams p = pr.params(nullptr, nullptr);
      p.prefill_impl = impl;
      expect_rounded_output_is_plain_rounded(
          pr, size_t(p.num_heads) * head_dim, [&](void* out, bool round) {
            AttentionParams q = p;
            q.out = out;
            q.round_q8_out = round;
            return attention_prefill(q, nullptr);
          });
      if (impl != PrefillImpl::kHopper) continue;
      // Split: the combine kernel rounds what it stores.
      DeviceBuffer ws(attention_prefill_workspace_bytes(p, 3));
      expect_rounded_output_is_plain_rounded(
          pr, size_t(p.num_heads) * head_dim, [&](void* out, bool round) {
            AttentionParams q = p;
            q.out = out;
            q.round_q8_out = round;
            return attention_prefill(q, 3, ws.get(), ws.bytes(), nullptr);
          });
    }
  }
}

// The Hopper prefill stores whole 64-row blocks by TMA only from a 16-byte aligned output
// (attention_prefill.cu, o_by_tma); an output 8 bytes off that stores every row from
// registers. Both stores pack the same values, so the two outputs must be the same bits, and
// the unaligned one (with the second run's LSE) must also stand against the reference. Varlen and chunked shapes past 1k
// rows at both head_dims: whole blocks (the TMA path when aligned) and partial ones.
TEST(PrefillOutputTest, AnOutputNotSixteenByteAlignedGetsTheSameBits) {
  SKIP_WITHOUT_GPU();
  if (!device_is_hopper()) GTEST_SKIP() << "not a Hopper GPU";
  for (int head_dim : {64, 128}) {
    for (bool chunked : {false, true}) {
      const uint32_t seed = fresh_seed();
      SCOPED_TRACE("d" + std::to_string(head_dim) + (chunked ? " chunked" : " varlen") +
                   " seed " + std::to_string(seed));
      ProblemShape shape;
      shape.dtype = DType::kBf16;
      shape.head_dim = head_dim;
      shape.num_heads = 6;
      shape.num_kv_heads = 2;
      shape.causal = true;
      shape.q_lens = chunked ? capped({17, 512, 300}) : capped({97, 1100, 64});
      shape.kv_lens = chunked ? capped({1025, 2000, 300}) : shape.q_lens;
      const Problem pr(shape, seed);
      AttentionParams p = pr.params(nullptr, nullptr);
      p.prefill_impl = PrefillImpl::kHopper;
      const size_t bytes = pr.out_elems() * 2;
      DeviceBuffer aligned(bytes), shifted(bytes + 16);  // cudaMalloc: 256-byte aligned
      DeviceBuffer lse(size_t(pr.num_tokens) * shape.num_heads * sizeof(float));
      aligned.poison();
      shifted.poison();
      lse.poison();
      for (void* out : {aligned.get(), static_cast<void*>(shifted.get<char>() + 8)}) {
        AttentionParams q = p;
        q.out = out;
        q.lse = lse.get<float>();
        const absl::Status status = attention_prefill(q, nullptr);
        ASSERT_TRUE(status.ok()) << status;
      }
      FS_CUDA_OR_DIE(cudaDeviceSynchronize());
      std::vector<uint16_t> a(pr.out_elems()), s(pr.out_elems());
      FS_CUDA_OR_DIE(cudaMemcpy(a.data(), aligned.get(), bytes, cudaMemcpyDeviceToHost));
      FS_CUDA_OR_DIE(
          cudaMemcpy(s.data(), shifted.get<char>() + 8, bytes, cudaMemcpyDeviceToHost));
      size_t differ = 0;
      for (size_t i = 0; i < a.size(); ++i) differ += a[i] != s[i];
      EXPECT_EQ(differ, 0u) << "of " << a.size() << " outputs";
      Outputs fused{std::vector<float>(s.size()), lse.to_host<float>()};
      for (size_t i = 0; i < s.size(); ++i) {
        fused.out[i] = testing::from_half_bits(shape.dtype, s[i]);
      }
      expect_within_naive(pr, fused, run_naive(pr, p), "out 8 bytes past 16-byte alignment");
    }
  }
}

}  // namespace
}  // namespace flashserve::kernels
