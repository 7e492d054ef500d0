// The layer kernels (kernels/layers.h) and the sampling kernels (kernels/sampling.h) against
// their fp32 CPU references, on fresh random inputs of odd sizes.
//
// Tolerance policy. Inputs are rounded to bf16 on the host, so the CPU reference sees exactly
// the kernel's inputs; the kernels compute in fp32 and round once to bf16, so each output may
// differ from the fp32 reference by that one rounding (half a bf16 ulp, 2^-9 relative) plus
// fp32 reordering (~1e-7 relative): we allow one bf16 ulp, 2^-8 |ref| + 1e-6. Copies (the
// embedding gather, V into the cache, the sampled-token gather) must be bit-exact. Outputs
// are poisoned first.
// Sampling: the same token as the CPU reference for the same spec and uniform on every row
// (a flip needs a weight sum within ~1e-6 relative of a boundary: never seen, and the test
// would show it), logprobs within 1e-4.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/attention_ref.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/device.h"
#include "kernels/layers.h"
#include "kernels/paged_kv.h"
#include "kernels/quant/quant_gemm.h"
#include "kernels/sampling.h"
#include "tests/unit/kernels_cuda/attention_problem.h"

namespace flashserve::kernels {
namespace {

using testing::Bf16Data;
using testing::DeviceBuffer;
using testing::random_bf16;

std::mt19937 fresh_rng() { return std::mt19937(std::random_device{}()); }

std::vector<float> to_floats(const std::vector<uint16_t>& bits) {
  std::vector<float> f;
  for (uint16_t b : bits) f.push_back(bf16_bits_to_fp32(b));
  return f;
}

void expect_within_one_ulp(const std::vector<float>& got, const std::vector<float>& ref,
                           const char* what) {
  ASSERT_EQ(got.size(), ref.size());
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float tol = 0x1p-8f * std::fabs(ref[i]) + 1e-6f;
    if (!(std::fabs(got[i] - ref[i]) <= tol) && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", reference " << ref[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(LayersCuda, EmbeddingGatherCopiesRowsExactly) {
  SKIP_WITHOUT_GPU();
  auto rng = fresh_rng();
  const int vocab = 97, dim = 576;
  const Bf16Data table = random_bf16(static_cast<size_t>(vocab) * dim, 1.f, rng);
  const std::vector<int32_t> ids = {0, 96, 5, 5, 41};
  DeviceBuffer d_table = DeviceBuffer::from(table.bits), d_ids = DeviceBuffer::from(ids);
  DeviceBuffer out(ids.size() * dim * sizeof(float));
  out.poison();
  EmbeddingParams p;
  p.table = d_table.get();
  p.token_ids = d_ids.get<int32_t>();
  p.out = out.get<float>();
  p.num_tokens = static_cast<int>(ids.size());
  p.dim = dim;
  ASSERT_TRUE(embedding_gather(p, nullptr).ok());
  const std::vector<float> got = out.to_host<float>();
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int i = 0; i < dim; ++i) {
      ASSERT_EQ(got[t * dim + i], table.values[size_t(ids[t]) * dim + i]) << t << "," << i;
    }
  }
}

TEST(LayersCuda, RmsNormMatchesReferenceWithRowGather) {
  SKIP_WITHOUT_GPU();
  auto rng = fresh_rng();
  for (int dim : {576, 4096, 17}) {
    const int rows_in = 9;
    std::normal_distribution<float> dist(0.f, 3.f);
    std::vector<float> x(static_cast<size_t>(rows_in) * dim), w(dim);
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = 1.f + 0.1f * dist(rng);
    const std::vector<int32_t> rows = {8, 0, 3};
    DeviceBuffer d_x = DeviceBuffer::from(x), d_w = DeviceBuffer::from(w);
    DeviceBuffer d_rows = DeviceBuffer::from(rows);
    DeviceBuffer out(rows.size() * dim * 2);
    out.poison();
    RmsNormParams p;
    p.x = d_x.get<float>();
    p.rows = d_rows.get<int32_t>();
    p.weight = d_w.get<float>();
    p.out = out.get();
    p.num_rows = static_cast<int>(rows.size());
    p.dim = dim;
    p.eps = 1e-5f;
    ASSERT_TRUE(rmsnorm(p, nullptr).ok());
    std::vector<float> gathered, ref(rows.size() * dim);
    for (int32_t r : rows) gathered.insert(gathered.end(), x.begin() + r * dim, x.begin() + (r + 1) * dim);
    rmsnorm_cpu(gathered.data(), w.data(), static_cast<int64_t>(rows.size()), dim, 1e-5f, ref.data());
    expect_within_one_ulp(to_floats(out.to_host<uint16_t>()), ref, "rmsnorm");
  }
}

// The device side of a rope_qkv_append test: the qkv rows, a RoPE table over positions
// [0, num_positions), positions and slots, and poisoned Q and K/V cache outputs; params()
// fills RopeAppendParams for them (bias and norms are the caller's).
struct RopeAppendBuffers {
  RopeAppendBuffers(const Bf16Data& qkv, const std::vector<int32_t>& positions,
                    const std::vector<int32_t>& slots, int heads, int kv_heads, int head_dim,
                    int block_size, int num_blocks, int num_positions)
      : heads(heads), kv_heads(kv_heads), head_dim(head_dim), block_size(block_size),
        tokens(static_cast<int>(positions.size())),
        cache_elems(static_cast<size_t>(num_blocks) * kv_heads * block_size * head_dim) {
    std::vector<int32_t> all_pos(num_positions);
    for (int i = 0; i < num_positions; ++i) all_pos[i] = i;
    std::vector<float> cos(static_cast<size_t>(num_positions) * head_dim / 2), sin(cos.size());
    rope_cos_sin_cpu(all_pos.data(), num_positions, head_dim, 10000.f, cos.data(), sin.data());
    d_qkv = DeviceBuffer::from(qkv.bits);
    d_cos = DeviceBuffer::from(cos);
    d_sin = DeviceBuffer::from(sin);
    d_pos = DeviceBuffer::from(positions);
    d_slots = DeviceBuffer::from(slots);
    q_out = DeviceBuffer(static_cast<size_t>(tokens) * heads * head_dim * 2);
    k_cache = DeviceBuffer(cache_elems * 2);
    v_cache = DeviceBuffer(cache_elems * 2);
    q_out.poison();
    k_cache.poison();
    v_cache.poison();
  }
  RopeAppendParams params() const {
    RopeAppendParams p;
    p.qkv = d_qkv.get();
    p.cos = d_cos.get<float>();
    p.sin = d_sin.get<float>();
    p.positions = d_pos.get<int32_t>();
    p.slot_mapping = d_slots.get<int32_t>();
    p.q_out = q_out.get();
    p.k_cache = k_cache.get();
    p.v_cache = v_cache.get();
    p.num_tokens = tokens;
    p.num_heads = heads;
    p.num_kv_heads = kv_heads;
    p.head_dim = head_dim;
    p.block_size = block_size;
    return p;
  }
  int heads, kv_heads, head_dim, block_size, tokens;
  size_t cache_elems;
  DeviceBuffer d_qkv, d_cos, d_sin, d_pos, d_slots, q_out, k_cache, v_cache;
};

TEST(LayersCuda, RopeAppendMatchesRopeThenKvAppend) {
  SKIP_WITHOUT_GPU();
  auto rng = fresh_rng();
  for (int head_dim : {64, 128}) {
    const int heads = 9, kv_heads = 3, tokens = 17, block_size = 64, num_blocks = 4;
    const int row = (heads + 2 * kv_heads) * head_dim;
    const Bf16Data qkv = random_bf16(static_cast<size_t>(tokens) * row, 1.f, rng);
    std::vector<int32_t> positions(tokens), slots(tokens);
    for (int t = 0; t < tokens; ++t) {
      positions[t] = 100 + 7 * t;                 // arbitrary positions
      slots[t] = t == 5 ? -1 : (3 - t % 3) * block_size + t;  // shuffled blocks, one padding
    }
    const RopeAppendBuffers d(qkv, positions, slots, heads, kv_heads, head_dim, block_size,
                              num_blocks, 300);
    const size_t cache_elems = d.cache_elems;
    ASSERT_TRUE(rope_qkv_append(d.params(), nullptr).ok());

    // Reference: split, rope_cpu, kv_append_cpu into NaN-filled caches.
    std::vector<float> q, k, v;
    for (int t = 0; t < tokens; ++t) {
      const float* r = qkv.values.data() + static_cast<size_t>(t) * row;
      q.insert(q.end(), r, r + heads * head_dim);
      k.insert(k.end(), r + heads * head_dim, r + (heads + kv_heads) * head_dim);
      v.insert(v.end(), r + (heads + kv_heads) * head_dim, r + row);
    }
    rope_cpu(q.data(), k.data(), positions.data(), tokens, heads, kv_heads, head_dim, 10000.f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> kc(cache_elems, nan), vc(cache_elems, nan);
    kv_append_cpu(k.data(), v.data(), slots.data(), tokens, kv_heads, head_dim, block_size,
                  kc.data(), vc.data());
    expect_within_one_ulp(to_floats(d.q_out.to_host<uint16_t>()), q, "q");
    const std::vector<float> got_k = to_floats(d.k_cache.to_host<uint16_t>());
    const std::vector<float> got_v = to_floats(d.v_cache.to_host<uint16_t>());
    std::vector<float> written_k, ref_k;
    for (size_t i = 0; i < cache_elems; ++i) {
      if (std::isnan(kc[i])) {  // rows nobody owns stay poisoned
        ASSERT_TRUE(std::isnan(got_k[i]) && std::isnan(got_v[i])) << "slot element " << i;
        continue;
      }
      written_k.push_back(got_k[i]);
      ref_k.push_back(kc[i]);
      ASSERT_EQ(got_v[i], vc[i]) << "V is a copy, element " << i;
    }
    expect_within_one_ulp(written_k, ref_k, "k");
  }
}

// Qwen-style attention inputs: Q/K/V biases (fp32, added to the stored bf16 values) and a
// per-head RMSNorm of Q and K (Qwen3) before RoPE, against bias + rmsnorm_cpu per head +
// rope_cpu; V gets its bias only.
TEST(LayersCuda, RopeAppendWithBiasAndQkNormMatchesReference) {
  SKIP_WITHOUT_GPU();
  auto rng = fresh_rng();
  for (int head_dim : {64, 128}) {
    const int heads = 8, kv_heads = 2, tokens = 13, block_size = 64;
    const int row = (heads + 2 * kv_heads) * head_dim;
    const Bf16Data qkv = random_bf16(static_cast<size_t>(tokens) * row, 1.f, rng);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> bias(row), q_norm(head_dim), k_norm(head_dim);
    for (float& b : bias) b = 0.5f * normal(rng);
    for (float& w : q_norm) w = 1.f + 0.3f * normal(rng);
    for (float& w : k_norm) w = 1.f + 0.3f * normal(rng);
    std::vector<int32_t> positions(tokens), slots(tokens);
    for (int t = 0; t < tokens; ++t) {
      positions[t] = 3 + 11 * t;
      slots[t] = t;
    }
    const RopeAppendBuffers d(qkv, positions, slots, heads, kv_heads, head_dim, block_size, 1, 200);
    const size_t cache_elems = d.cache_elems;
    DeviceBuffer d_bias = DeviceBuffer::from(bias);
    DeviceBuffer d_qn = DeviceBuffer::from(q_norm), d_kn = DeviceBuffer::from(k_norm);
    RopeAppendParams p = d.params();
    p.bias = d_bias.get<float>();
    p.q_norm = d_qn.get<float>();
    p.k_norm = d_kn.get<float>();
    p.norm_eps = 1e-6f;
    ASSERT_TRUE(rope_qkv_append(p, nullptr).ok());

    std::vector<float> q, k, v;
    for (int t = 0; t < tokens; ++t) {
      std::vector<float> r(qkv.values.begin() + static_cast<size_t>(t) * row,
                           qkv.values.begin() + static_cast<size_t>(t + 1) * row);
      for (int j = 0; j < row; ++j) r[j] += bias[j];
      q.insert(q.end(), r.begin(), r.begin() + heads * head_dim);
      k.insert(k.end(), r.begin() + heads * head_dim, r.begin() + (heads + kv_heads) * head_dim);
      v.insert(v.end(), r.begin() + (heads + kv_heads) * head_dim, r.end());
    }
    rmsnorm_cpu(q.data(), q_norm.data(), int64_t{tokens} * heads, head_dim, 1e-6f, q.data());
    rmsnorm_cpu(k.data(), k_norm.data(), int64_t{tokens} * kv_heads, head_dim, 1e-6f, k.data());
    rope_cpu(q.data(), k.data(), positions.data(), tokens, heads, kv_heads, head_dim, 10000.f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> kc(cache_elems, nan), vc(cache_elems, nan);
    kv_append_cpu(k.data(), v.data(), slots.data(), tokens, kv_heads, head_dim, block_size,
                  kc.data(), vc.data());
    expect_within_one_ulp(to_floats(d.q_out.to_host<uint16_t>()), q, "q");
    const std::vector<float> got_k = to_floats(d.k_cache.to_host<uint16_t>());
    const std::vector<float> got_v = to_floats(d.v_cache.to_host<uint16_t>());
    std::vector<float> wk, rk, wv, rv;
    for (size_t i = 0; i < cache_elems; ++i) {
      if (std::isnan(kc[i])) continue;
      wk.push_back(got_k[i]);
      rk.push_back(kc[i]);
      wv.push_back(got_v[i]);
      rv.push_back(vc[i]);
    }
    ASSERT_EQ(wk.size(), static_cast<size_t>(tokens) * kv_heads * head_dim);
    expect_within_one_ulp(wk, rk, "k");
    expect_within_one_ulp(wv, rv, "v");
  }
}

TEST(LayersCuda, SwigluMatchesReference) {
  SKIP_WITHOUT_GPU();
  auto rng = fresh_rng();
  const int rows = 13, ffn = 1536;
  const Bf16Data gate_up = random_bf16(static_cast<size_t>(rows) * 2 * ffn, 4.f, rng);
  std::vector<float> gate, up, ref(static_cast<size_t>(rows) * ffn);
  for (int r = 0; r < rows; ++r) {
    const float* g = gate_up.values.data() + static_cast<size_t>(r) * 2 * ffn;
    gate.insert(gate.end(), g, g + ffn);
    up.insert(up.end(), g + ffn, g + 2 * ffn);
  }
  swiglu_cpu(gate.data(), up.data(), rows, ffn, ref.data());
  DeviceBuffer d_in = DeviceBuffer::from(gate_up.bits), out(ref.size() * 2);
  out.poison();
  SwigluParams p;
  p.gate_up = d_in.get();
  p.out = out.get();
  p.num_rows = rows;
  p.ffn_size = ffn;
  ASSERT_TRUE(swiglu(p, nullptr).ok());
  expect_within_one_ulp(to_floats(out.to_host<uint16_t>()), ref, "swiglu");
}

// The fold of a deferred split-k sum (RmsNormParams::partials, SwigluParams::partials)
// against quant_gemm_reduce() followed by the same kernel without partials, bit for bit: x
// brought up to date and the norm's output; SwiGLU's output from gate/up sums rounded to
// bf16. 2 to 17 splits (the fold issues 8 splits' loads at a time), rows of 2,048 and 576
// floats (16-byte loads, two chunks a thread at a time: whole pairs, and a part pair) and of
// 17 (element by element), ffn sizes that are and are not multiples of the vector width,
// with and without round_q8.
TEST(LayersCuda, NormAndSwigluAddADeferredSplitSumBitForBit) {
  SKIP_WITHOUT_GPU();
  auto rng = fresh_rng();
  std::normal_distribution<float> dist(0.f, 1.f);
  const int rows = 5;
  auto random = [&](size_t n, float scale) {
    std::vector<float> v(n);
    for (float& e : v) e = scale * dist(rng);
    return v;
  };
  auto reduce_into = [&](DeviceBuffer& y, GemvOutput out, const DeviceBuffer& part, int n,
                         int splits) {
    QuantGemmParams q;
    q.output = out;
    q.y = y.get();
    q.ldy = n;
    q.m = rows;
    q.n = n;
    q.partials = part.get<float>();
    q.partials_floats = static_cast<int64_t>(part.bytes() / 4);
    return quant_gemm_reduce(q, splits, nullptr);
  };
  for (const int splits : {2, 3, 8, 16, 17}) {
    for (const int dim : {2048, 576, 17}) {
      for (const bool round_q8 : {false, true}) {
        if (round_q8 && dim % 32 != 0) continue;
        SCOPED_TRACE(::testing::Message() << "rmsnorm splits " << splits << " dim " << dim
                                          << " round_q8 " << round_q8);
        const std::vector<float> x = random(size_t{rows} * dim, 3.f), w = random(dim, 0.1f);
        const std::vector<float> part = random(static_cast<size_t>(splits) * rows * dim, 0.5f);
        DeviceBuffer x_want = DeviceBuffer::from(x), x_got = DeviceBuffer::from(x);
        DeviceBuffer d_w = DeviceBuffer::from(w), d_part = DeviceBuffer::from(part);
        DeviceBuffer want(size_t{rows} * dim * 2), got(size_t{rows} * dim * 2);
        want.poison();
        got.poison();
        ASSERT_TRUE(reduce_into(x_want, GemvOutput::kFp32Accumulate, d_part, dim, splits).ok());
        RmsNormParams p;
        p.x = x_want.get<float>();
        p.weight = d_w.get<float>();
        p.out = want.get();
        p.num_rows = rows;
        p.dim = dim;
        p.eps = 1e-5f;
        p.round_q8 = round_q8;
        ASSERT_TRUE(rmsnorm(p, nullptr).ok());
        p.x = x_got.get<float>();
        p.out = got.get();
        p.partials = d_part.get<float>();
        p.splits = splits;
        ASSERT_TRUE(rmsnorm(p, nullptr).ok());
        EXPECT_EQ(x_got.to_host<uint32_t>(), x_want.to_host<uint32_t>()) << "x";
        EXPECT_EQ(got.to_host<uint16_t>(), want.to_host<uint16_t>()) << "normed";
      }
    }
    for (const int ffn : {1536, 1504, 100}) {
      for (const bool round_q8 : {false, true}) {
        if (round_q8 && ffn % 32 != 0) continue;
        SCOPED_TRACE(::testing::Message() << "swiglu splits " << splits << " ffn " << ffn
                                          << " round_q8 " << round_q8);
        const std::vector<float> part = random(static_cast<size_t>(splits) * rows * 2 * ffn, 1.f);
        DeviceBuffer d_part = DeviceBuffer::from(part), gate_up(size_t{rows} * 2 * ffn * 2);
        DeviceBuffer want(size_t{rows} * ffn * 2), got(size_t{rows} * ffn * 2);
        want.poison();
        got.poison();
        ASSERT_TRUE(reduce_into(gate_up, GemvOutput::kBf16, d_part, 2 * ffn, splits).ok());
        SwigluParams a;
        a.gate_up = gate_up.get();
        a.out = want.get();
        a.num_rows = rows;
        a.ffn_size = ffn;
        a.round_q8 = round_q8;
        ASSERT_TRUE(swiglu(a, nullptr).ok());
        a.gate_up = nullptr;  // not read with partials
        a.out = got.get();
        a.partials = d_part.get<float>();
        a.splits = splits;
        ASSERT_TRUE(swiglu(a, nullptr).ok());
        EXPECT_EQ(got.to_host<uint16_t>(), want.to_host<uint16_t>()) << "swiglu";
      }
    }
  }
}

TEST(LayersCuda, RejectsUnsupportedShapes) {
  RopeAppendParams p;
  p.head_dim = 63;
  p.num_heads = p.num_kv_heads = p.block_size = 1;
  EXPECT_EQ(rope_qkv_append(p, nullptr).code(), absl::StatusCode::kInvalidArgument);
  SwigluParams bad_dtype;  // rejected before any launch: needs no GPU
  bad_dtype.dtype = static_cast<DType>(7);
  bad_dtype.num_rows = 1;
  bad_dtype.ffn_size = 8;
  const absl::Status s = swiglu(bad_dtype, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("swiglu: unsupported dtype 7"), absl::string_view::npos) << s;
  SwigluParams no_splits;  // partials with no split count
  no_splits.num_rows = 1;
  no_splits.ffn_size = 8;
  no_splits.partials = reinterpret_cast<const float*>(16);
  EXPECT_EQ(swiglu(no_splits, nullptr).code(), absl::StatusCode::kInvalidArgument);
  RmsNormParams gathered_fold;  // a fold must bring every row of x up to date
  const int32_t row = 0;
  gathered_fold.rows = &row;
  gathered_fold.num_rows = 1;
  gathered_fold.dim = 64;
  gathered_fold.partials = reinterpret_cast<const float*>(16);
  gathered_fold.splits = 2;
  const absl::Status g = rmsnorm(gathered_fold, nullptr);
  EXPECT_EQ(g.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.message().find("partials"), absl::string_view::npos) << g;
  SamplingBatch b;
  b.vocab = 0;
  EXPECT_EQ(sample_tokens(b, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

// ---- sampling ------------------------------------------------------------------------------

SampleSpec spec_of(float temperature, int top_k, float top_p, float min_p, double uniform) {
  SampleSpec s;
  s.temperature = temperature;
  s.top_k = top_k;
  s.top_p = top_p;
  s.min_p = min_p;
  s.uniform = uniform;
  s.want_logprob = 1;
  return s;
}

TEST(SamplingCuda, SameTokensAndLogprobsAsTheCpuReference) {
  SKIP_WITHOUT_GPU();
  auto rng = fresh_rng();
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int vocab : {49152, 1000, 17}) {
    std::vector<SampleSpec> specs;
    std::vector<int32_t> pen_tokens, pen_counts;
    for (float t : {0.f, 0.7f, 1.f, 1.5f, 1e-38f}) {
      for (int k : {0, 1, 40}) {
        for (float p : {1.f, 0.9f, 0.3f}) {
          for (float m : {0.f, 0.05f}) specs.push_back(spec_of(t, k, p, m, uniform(rng)));
        }
      }
    }
    for (int i = 0; i < 8; ++i) {  // penalties and top logprobs
      SampleSpec s = spec_of(i % 2 ? 0.8f : 0.f, 0, 0.95f, 0.f, uniform(rng));
      s.repetition_penalty = i < 4 ? 1.3f : 1e-45f;
      s.frequency_penalty = 0.5f;
      s.presence_penalty = -0.25f;
      s.num_top_logprobs = std::min(20, vocab);
      s.penalty_begin = static_cast<int32_t>(pen_tokens.size());
      for (int j = 0; j < 30; ++j) {
        pen_tokens.push_back((j * 37 + i) % vocab == j ? -1 : (j * 37 + i) % vocab);
        pen_counts.push_back(j % 3);
      }
      // Distinct tokens per row (the contract): dedupe this row's entries.
      std::vector<int32_t> seen;
      for (int e = s.penalty_begin; e < static_cast<int>(pen_tokens.size()); ++e) {
        if (std::find(seen.begin(), seen.end(), pen_tokens[e]) != seen.end()) pen_tokens[e] = -1;
        seen.push_back(pen_tokens[e]);
      }
      s.penalty_end = static_cast<int32_t>(pen_tokens.size());
      specs.push_back(s);
    }
    // Rows without logprobs or penalties take the kernel's one-pass path (NaN clean-up and
    // argmax fused): greedy and sampled, one row with NaNs where its maximum would be, one
    // row of NaNs only (token 0, as the reference).
    const int first_plain = static_cast<int>(specs.size());
    for (float t : {0.f, 0.f, 0.f, 0.8f, 1e-38f}) {
      SampleSpec s = spec_of(t, t > 0.5f ? 40 : 0, t > 0.5f ? 0.9f : 1.f, 0.f, uniform(rng));
      s.want_logprob = 0;
      specs.push_back(s);
    }
    const int rows = static_cast<int>(specs.size());
    std::normal_distribution<float> dist(0.f, 2.f);
    std::vector<float> logits(static_cast<size_t>(rows) * vocab);
    for (float& l : logits) l = dist(rng);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    logits[3] = nan;
    logits[vocab + 2] = -std::numeric_limits<float>::infinity();
    float* with_nans = logits.data() + static_cast<size_t>(first_plain + 1) * vocab;
    with_nans[vocab / 2] = 100.f;  // the maximum ...
    with_nans[vocab / 2 + 1] = nan;  // ... beside NaNs, at both ends too
    with_nans[0] = nan;
    with_nans[vocab - 1] = nan;
    float* all_nan = logits.data() + static_cast<size_t>(first_plain + 2) * vocab;
    std::fill(all_nan, all_nan + vocab, nan);

    DeviceBuffer d_logits = DeviceBuffer::from(logits), d_specs = DeviceBuffer::from(specs);
    DeviceBuffer d_pt = DeviceBuffer::from(pen_tokens), d_pc = DeviceBuffer::from(pen_counts);
    DeviceBuffer scratch(pen_tokens.size() * sizeof(float) + 4);
    DeviceBuffer results(rows * sizeof(SampleResult));
    results.poison();
    SamplingBatch b;
    b.logits = d_logits.get<float>();
    b.specs = d_specs.get<SampleSpec>();
    b.penalty_tokens = d_pt.get<int32_t>();
    b.penalty_counts = d_pc.get<int32_t>();
    b.penalty_scratch = scratch.get<float>();
    b.results = results.get<SampleResult>();
    b.num_rows = rows;
    b.vocab = vocab;
    ASSERT_TRUE(sample_tokens(b, nullptr).ok());
    const std::vector<SampleResult> got = results.to_host<SampleResult>();
    for (int r = 0; r < rows; ++r) {
      std::vector<float> row(logits.begin() + static_cast<size_t>(r) * vocab,
                             logits.begin() + static_cast<size_t>(r + 1) * vocab);
      const SampleResult ref =
          sample_row_cpu(row.data(), vocab, specs[r], pen_tokens.data(), pen_counts.data());
      const SampleSpec& s = specs[r];
      const std::string what = "vocab " + std::to_string(vocab) + " row " + std::to_string(r) +
                               " T " + std::to_string(s.temperature) + " k " +
                               std::to_string(s.top_k) + " p " + std::to_string(s.top_p) +
                               " min_p " + std::to_string(s.min_p);
      EXPECT_EQ(got[r].token, ref.token) << what;
      EXPECT_NEAR(got[r].logprob, ref.logprob, 1e-4) << what;
      for (int j = 0; j < s.num_top_logprobs; ++j) {
        EXPECT_EQ(got[r].top_tokens[j], ref.top_tokens[j]) << what << " top " << j;
        EXPECT_NEAR(got[r].top_logprobs[j], ref.top_logprobs[j], 1e-4) << what << " top " << j;
      }
    }
  }
}

// An overlapped step's tokens from the previous step's samples: exactly the reference's copy,
// over more pairs than one CTA takes, every other token left as it was.
TEST(SamplingCuda, GatherSampledTokensCopiesAsTheCpuReference) {
  SKIP_WITHOUT_GPU();
  auto rng = fresh_rng();
  const int num_results = 300, num_tokens = 700;
  std::uniform_int_distribution<int32_t> token(0, 49151);
  std::vector<SampleResult> results(num_results);
  for (SampleResult& r : results) r.token = token(rng);
  std::vector<int32_t> token_ids(num_tokens);
  for (int32_t& t : token_ids) t = token(rng);
  std::vector<int32_t> targets(num_tokens);
  std::iota(targets.begin(), targets.end(), 0);
  std::shuffle(targets.begin(), targets.end(), rng);
  std::vector<int32_t> pairs;
  for (int p = 0; p < 400; ++p) {  // distinct targets; sources repeat
    pairs.push_back(targets[p]);
    pairs.push_back((p * 7) % num_results);
  }
  DeviceBuffer d_results = DeviceBuffer::from(results), d_pairs = DeviceBuffer::from(pairs);
  DeviceBuffer d_tokens = DeviceBuffer::from(token_ids);
  SampledTokenGather g;
  g.results = d_results.get<SampleResult>();
  g.pairs = d_pairs.get<int32_t>();
  g.token_ids = d_tokens.get<int32_t>();
  g.num_pairs = static_cast<int>(pairs.size() / 2);
  ASSERT_TRUE(gather_sampled_tokens(g, nullptr).ok());
  SampledTokenGather ref = g;
  ref.results = results.data();
  ref.pairs = pairs.data();
  ref.token_ids = token_ids.data();
  gather_sampled_tokens_cpu(ref);
  EXPECT_EQ(d_tokens.to_host<int32_t>(), token_ids);
  g.num_pairs = 0;
  EXPECT_TRUE(gather_sampled_tokens(g, nullptr).ok());  // launches nothing
  g.num_pairs = -1;
  EXPECT_EQ(gather_sampled_tokens(g, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashserve::kernels
