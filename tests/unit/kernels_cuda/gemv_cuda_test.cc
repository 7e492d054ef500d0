// The fused small-batch GEMV (kernels/gemv.h) against its fp32 reference (kernels/cpu/gemv.h)
// on random bf16 data, for every input and output kind, every row bucket and odd n.
//
// Tolerance, derived per output from S = sum_i |w_i x_i| (the reference run on |x|, |w|):
//   - bf16 input: only the summation order differs (fp32 against double), k * 2^-24 * S at
//     most; we allow 2^-16 * S, plus one bf16 rounding of the output (2^-8 |ref|);
//   - RMSNorm input: the normalised inputs are rounded to bf16 on both sides, but the scale
//     is summed in another order, so an input may round the other way: one bf16 ulp of an
//     input, 2^-8 * S in the worst case; and since such flips are rare, the mean error over
//     all outputs must stay below 2^-12 * mean S;
//   - SwiGLU: the gate and up errors (as above, plus one rounding each) through
//     silu(g) * u, whose derivative in g is at most 1.1.
// A dropped or misplaced 16-byte chunk moves an output by ~sqrt(8) typical products, far
// outside these bounds. Outputs are poisoned (NaN) first; kFp32Accumulate starts from data.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/gemv.h"
#include "kernels/cpu/rope.h"
#include "kernels/device.h"
#include "kernels/gemv.h"
#include "kernels/layers.h"
#include "tests/unit/kernels_cuda/attention_problem.h"

namespace flashserve::kernels {
namespace {

using testing::DeviceBuffer;
using testing::random_bf16;
using Bf16 = testing::Bf16Data;

std::vector<float> abs_of(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

struct Case {
  GemvInput input;
  GemvOutput output;
  int m, n, k;
};

void run_case(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << "input " << static_cast<int>(c.input) << " output "
                                    << static_cast<int>(c.output) << " m " << c.m << " n "
                                    << c.n << " k " << c.k);
  const bool swiglu = c.output == GemvOutput::kSwiglu;
  const bool norm = c.input == GemvInput::kRmsNorm;
  const int w_rows = swiglu ? 2 * c.n : c.n;
  const Bf16 w = random_bf16(static_cast<size_t>(w_rows) * c.k, 0.05f, rng);
  // kRmsNorm reads fp32 rows gathered from a larger x; kBf16 reads [m, k] bf16.
  const int x_rows = norm ? c.m + 3 : c.m;
  std::vector<int32_t> rows;
  for (int r = 0; r < c.m; ++r) rows.push_back((r * 5 + 2) % x_rows);
  std::vector<float> x_values;
  std::vector<uint16_t> x_bits;
  std::normal_distribution<float> dist(0.f, 2.f);
  if (norm) {
    for (int i = 0; i < x_rows * c.k; ++i) x_values.push_back(dist(rng));
  } else {
    const Bf16 x = random_bf16(static_cast<size_t>(c.m) * c.k, 1.f, rng);
    x_values = x.values;
    x_bits = x.bits;
  }
  std::vector<float> gamma(c.k);
  for (float& g : gamma) g = 1.f + 0.1f * dist(rng);
  const bool fp32_out = c.output == GemvOutput::kFp32 || c.output == GemvOutput::kFp32Accumulate;
  std::vector<float> y_start(static_cast<size_t>(c.m) * c.n);
  for (float& v : y_start) v = dist(rng);

  DeviceBuffer d_w = DeviceBuffer::from(w.bits);
  DeviceBuffer d_x = norm ? DeviceBuffer::from(x_values) : DeviceBuffer::from(x_bits);
  DeviceBuffer d_rows = DeviceBuffer::from(rows), d_gamma = DeviceBuffer::from(gamma);
  DeviceBuffer d_y = c.output == GemvOutput::kFp32Accumulate
                         ? DeviceBuffer::from(y_start)
                         : DeviceBuffer(static_cast<size_t>(c.m) * c.n * (fp32_out ? 4 : 2));
  if (c.output != GemvOutput::kFp32Accumulate) d_y.poison();
  GemvParams p;
  p.input = c.input;
  p.x = d_x.get();
  p.rows = norm ? d_rows.get<int32_t>() : nullptr;
  p.norm_weight = d_gamma.get<float>();
  p.eps = 1e-5f;
  p.w = d_w.get();
  p.output = c.output;
  p.y = d_y.get();
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  ASSERT_TRUE(gemv(p, 132, nullptr).ok());
  std::vector<float> got;
  if (fp32_out) {
    got = d_y.to_host<float>();
  } else {
    for (uint16_t b : d_y.to_host<uint16_t>()) got.push_back(bf16_bits_to_fp32(b));
  }

  GemvCpuParams r;
  r.input = c.input;
  r.x = x_values.data();
  r.rows = norm ? rows.data() : nullptr;
  r.norm_weight = gamma.data();
  r.eps = 1e-5f;
  r.w = w.values.data();
  // A bf16 output is compared with the unrounded fp32 reference: the kernel's rounding is the
  // one 0x1p-8 * |ref| below covers (half an ulp at most). Rounding the reference as well
  // would add a second, independent rounding: two values a hair apart on either side of a
  // rounding midpoint then differ by a whole ulp (seen on the H200: 1.140625 vs 1.1484375).
  r.output = c.output == GemvOutput::kBf16 ? GemvOutput::kFp32 : c.output;
  r.m = c.m;
  r.n = c.n;
  r.k = c.k;
  std::vector<float> ref = c.output == GemvOutput::kFp32Accumulate ? y_start
                                                                   : std::vector<float>(got.size());
  r.y = ref.data();
  gemv_cpu(r);
  // S per output (gate and up halves separately for SwiGLU), and g, u for SwiGLU.
  auto sums = [&](int first_row, bool absolute) {
    const std::vector<float> ax = absolute ? abs_of(x_values) : x_values;
    const std::vector<float> aw = absolute ? abs_of(w.values) : w.values;
    const std::vector<float> ag = absolute ? abs_of(gamma) : gamma;
    GemvCpuParams s = r;
    s.x = ax.data();
    s.norm_weight = ag.data();
    s.w = aw.data() + static_cast<size_t>(first_row) * c.k;
    s.output = GemvOutput::kFp32;
    std::vector<float> out(got.size());
    s.y = out.data();
    gemv_cpu(s);
    return out;
  };
  const std::vector<float> s0 = sums(0, true);
  const std::vector<float> s1 = swiglu ? sums(c.n, true) : s0;
  const std::vector<float> g = swiglu ? sums(0, false) : s0;
  const std::vector<float> u = swiglu ? sums(c.n, false) : s0;
  const float input_err = norm ? 0x1p-8f : 0x1p-16f;
  double err_sum = 0, s_sum = 0;
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    float tol;
    if (swiglu) {
      const float dg = input_err * s0[i] + 0x1p-8f * std::fabs(g[i]);
      const float du = input_err * s1[i] + 0x1p-8f * std::fabs(u[i]);
      tol = 1.1f * dg * std::fabs(u[i]) + (std::fabs(g[i]) + 0.3f) * du + dg * du;
    } else {
      tol = input_err * s0[i];
    }
    tol += (fp32_out ? 0x1p-20f : 0x1p-8f) * std::fabs(ref[i]) + 1e-6f;
    const float err = std::fabs(got[i] - ref[i]);
    err_sum += err;
    s_sum += s0[i];
    if (!(err <= tol) && ++bad <= 5) {
      ADD_FAILURE() << "y[" << i << "] = " << got[i] << ", reference " << ref[i] << ", tol "
                    << tol;
    }
  }
  EXPECT_EQ(bad, 0);
  if (norm && !swiglu) {
    EXPECT_LE(err_sum, 0x1p-12 * s_sum) << "rounding flips are not rare";
  }
}

TEST(GemvCuda, EveryInputOutputAndRowBucketMatchesTheReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // in every failure's trace: rerunnable
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (GemvInput in : {GemvInput::kBf16, GemvInput::kRmsNorm}) {
    for (GemvOutput out : {GemvOutput::kBf16, GemvOutput::kFp32, GemvOutput::kFp32Accumulate,
                           GemvOutput::kSwiglu}) {
      for (int m : {1, 2, 3, 5, 8}) {
        run_case({in, out, m, 37, 576}, rng);     // odd n: the last pair stores once
        run_case({in, out, m, 300, 1544}, rng);   // k past several unrolled rounds, not 256-aligned
      }
    }
  }
}

// The RoPE epilogue against the unfused composition on the GPU: the same GEMV storing bf16
// QKV, then rope_qkv_append (itself checked against rope_cpu + kv_append_cpu in
// layers_cuda_test). Same numerics by construction (the same dot products, one bf16
// rounding, the same rotation), so Q and K may differ by at most one bf16 ulp (a
// different contraction of the rotation's multiply-adds), V is a bit-exact copy, and cache
// slots nobody owns stay poisoned.
TEST(GemvCuda, RopeEpilogueMatchesGemvThenRopeAppend) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // in every failure's trace: rerunnable
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int head_dim : {64, 128}) {
    for (int m : {1, 3, 8}) {
      SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << " m " << m);
      const int heads = 9, kv_heads = 3, hidden = 576, block_size = 64, num_blocks = 3;
      const int n = (heads + 2 * kv_heads) * head_dim;
      const Bf16 w = random_bf16(static_cast<size_t>(n) * hidden, 0.05f, rng);
      std::normal_distribution<float> dist(0.f, 2.f);
      std::vector<float> x(static_cast<size_t>(m) * hidden), gamma(hidden);
      for (float& v : x) v = dist(rng);
      for (float& v : gamma) v = 1.f + 0.1f * dist(rng);
      std::vector<int32_t> positions(m), slots(m);
      for (int t = 0; t < m; ++t) {
        positions[t] = 40 + 9 * t;
        slots[t] = t == 1 ? -1 : (2 - t % 3) * block_size + 5 * t;  // one padding token
      }
      const int num_pos = 200;
      std::vector<int32_t> all(num_pos);
      for (int i = 0; i < num_pos; ++i) all[i] = i;
      std::vector<float> cos(static_cast<size_t>(num_pos) * head_dim / 2), sin(cos.size());
      rope_cos_sin_cpu(all.data(), num_pos, head_dim, 10000.f, cos.data(), sin.data());
      DeviceBuffer d_w = DeviceBuffer::from(w.bits), d_x = DeviceBuffer::from(x);
      DeviceBuffer d_gamma = DeviceBuffer::from(gamma), d_cos = DeviceBuffer::from(cos);
      DeviceBuffer d_sin = DeviceBuffer::from(sin), d_pos = DeviceBuffer::from(positions);
      DeviceBuffer d_slots = DeviceBuffer::from(slots);
      const size_t cache = static_cast<size_t>(num_blocks) * kv_heads * block_size * head_dim;
      const size_t q_elems = static_cast<size_t>(m) * heads * head_dim;
      DeviceBuffer qkv(static_cast<size_t>(m) * n * 2);
      DeviceBuffer q[2] = {DeviceBuffer(q_elems * 2), DeviceBuffer(q_elems * 2)};
      DeviceBuffer k[2] = {DeviceBuffer(cache * 2), DeviceBuffer(cache * 2)};
      DeviceBuffer v[2] = {DeviceBuffer(cache * 2), DeviceBuffer(cache * 2)};
      RopeAppendParams rope[2];
      for (int i = 0; i < 2; ++i) {
        q[i].poison();
        k[i].poison();
        v[i].poison();
        rope[i].qkv = qkv.get();
        rope[i].cos = d_cos.get<float>();
        rope[i].sin = d_sin.get<float>();
        rope[i].positions = d_pos.get<int32_t>();
        rope[i].slot_mapping = d_slots.get<int32_t>();
        rope[i].q_out = q[i].get();
        rope[i].k_cache = k[i].get();
        rope[i].v_cache = v[i].get();
        rope[i].num_tokens = m;
        rope[i].num_heads = heads;
        rope[i].num_kv_heads = kv_heads;
        rope[i].head_dim = head_dim;
        rope[i].block_size = block_size;
      }
      GemvParams p;
      p.input = GemvInput::kRmsNorm;
      p.x = d_x.get();
      p.norm_weight = d_gamma.get<float>();
      p.eps = 1e-5f;
      p.w = d_w.get();
      p.m = m;
      p.n = n;
      p.k = hidden;
      p.output = GemvOutput::kRopeAppend;
      p.rope = rope[0];
      ASSERT_TRUE(gemv(p, 132, nullptr).ok());
      p.output = GemvOutput::kBf16;
      p.y = qkv.get();
      ASSERT_TRUE(gemv(p, 132, nullptr).ok());
      ASSERT_TRUE(rope_qkv_append(rope[1], nullptr).ok());
      auto floats = [](const DeviceBuffer& b) {
        std::vector<float> f;
        for (uint16_t bits : b.to_host<uint16_t>()) f.push_back(bf16_bits_to_fp32(bits));
        return f;
      };
      const std::vector<float> q0 = floats(q[0]), q1 = floats(q[1]);
      const std::vector<float> k0 = floats(k[0]), k1 = floats(k[1]);
      const std::vector<float> v0 = floats(v[0]), v1 = floats(v[1]);
      int bad = 0;
      auto check = [&](float got, float ref, const char* what, size_t i) {
        if (std::isnan(ref)) {
          if (!std::isnan(got) && ++bad <= 5) ADD_FAILURE() << what << "[" << i << "] written";
          return;
        }
        if (!(std::fabs(got - ref) <= 0x1p-8f * std::fabs(ref) + 1e-6f) && ++bad <= 5) {
          ADD_FAILURE() << what << "[" << i << "] = " << got << ", unfused " << ref;
        }
      };
      for (size_t i = 0; i < q0.size(); ++i) check(q0[i], q1[i], "q", i);
      for (size_t i = 0; i < k0.size(); ++i) check(k0[i], k1[i], "k_cache", i);
      for (size_t i = 0; i < v0.size(); ++i) {
        if (std::isnan(v1[i]) ? !std::isnan(v0[i]) : v0[i] != v1[i]) {
          if (++bad <= 5) ADD_FAILURE() << "v_cache[" << i << "] = " << v0[i] << ", unfused " << v1[i];
        }
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

TEST(GemvCuda, RejectsUnsupportedShapesNamingThem) {
  GemvParams p;
  p.m = 9;
  p.n = 16;
  p.k = 576;
  const absl::Status s = gemv(p, 132, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("m 9"), std::string::npos) << s;
  EXPECT_FALSE(gemv_supported(1, 100));    // k not a multiple of 8
  EXPECT_FALSE(gemv_supported(8, 14336));  // staged rows past the shared-memory budget
  EXPECT_TRUE(gemv_supported(4, 14336));
  EXPECT_TRUE(gemv_supported(8, 576));
}

}  // namespace
}  // namespace flashserve::kernels
