// The quantized GEMV (kernels::gemv with a quantized w_format, kernels/quant/quant_gemv.h)
// against its fp32 reference (kernels/cpu/quant.h: ggml's dequantization, the q8
// activation rounding, gemv_cpu) on random ggml blocks (every quant bit random, random
// scales: tests/support/quant_blocks.h) repacked by quant_repack, for every format x input
// x output x row bucket, odd n and k past several unrolled passes; and dequantize_bf16
// bit for bit against ggml's values.
//
// Tolerance, per output, from S = sum |w^ x^| (w^, x^ the dequantized weights and
// activations both sides use):
//   - bf16 input: both sides quantize the same x to the same int8 (the same IEEE
//     operations), so only fp32 rounding differs: per unit a few roundings of the scale
//     products and the fp32 sum over units, < 2^-16 * S; plus one bf16 rounding of a bf16
//     output (2^-8 |ref|, fp32: 2^-20);
//   - RMSNorm input: the norm's scale is summed in another order, so a normalised input may
//     round to the other bf16 neighbour, and its int8 (and, if it was the unit's largest,
//     the unit's scale dx) with it: under 2 quant steps per element,
//     2 * sum_u dx_u * sum_{i in u} |w^_i| over all units in the worst case; such flips are
//     rare (a value within one float ulp of a rounding boundary), so the mean error over all
//     outputs must also stay below 2^-12 * mean S;
//   - SwiGLU: the gate and up errors (as above, plus one rounding each) through
//     silu(g) * u, whose derivative in g is at most 1.1.
// A wrong nibble, scale or misplaced unit moves an output by ~|w x| * sqrt(32) or more, far
// outside the bf16-input bound. Outputs are poisoned (NaN) first; kFp32Accumulate starts
// from data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/gemv.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/rope.h"
#include "kernels/device.h"
#include "kernels/gemv.h"
#include "kernels/layers.h"
#include "kernels/quant/quant_gemv.h"
#include "kernels/quant/quant_unit.h"
#include "tests/support/quant_blocks.h"
#include "tests/unit/kernels_cuda/attention_problem.h"
#include "tests/unit/kernels_cuda/quant_weight.h"

namespace flashserve::kernels {
namespace {

using ::flashserve::bf16_bits_to_fp32;
using testing::DeviceBuffer;
using testing::make_weight;
using testing::QuantWeight;
using testing::random_bf16;

// S (sum |w^ x^|) and the RMSNorm flip bound (2 sum_u dx_u sum |w^|) of output (r, j)
// for weight row `row`.
struct Bounds {
  std::vector<double> s, flip;  // [m, rows]
};
Bounds bounds(const GemvCpuParams& p, const std::vector<float>& w, int w_rows) {
  const std::vector<float> x = gemv_input_rows_cpu(p);
  const int64_t k = p.k, units = k / kQuantUnit;
  Bounds b;
  b.s.assign(static_cast<size_t>(p.m) * w_rows, 0.0);
  b.flip = b.s;
  std::vector<int8_t> q(k);
  std::vector<float> d(units);
  for (int r = 0; r < p.m; ++r) {
    quantize_q8_cpu(x.data() + r * k, k, q.data(), d.data());
    for (int j = 0; j < w_rows; ++j) {
      double s = 0, flip = 0;
      for (int64_t u = 0; u < units; ++u) {
        double wsum = 0;
        for (int64_t i = u * kQuantUnit; i < (u + 1) * kQuantUnit; ++i) {
          const double wi = std::fabs(double{w[j * k + i]});
          s += wi * std::fabs(double{d[u]} * q[i]);
          wsum += wi;
        }
        flip += 2.0 * d[u] * wsum;
      }
      b.s[r * w_rows + j] = s;
      b.flip[r * w_rows + j] = flip;
    }
  }
  return b;
}

struct Case {
  WeightFormat format;
  GemvInput input;
  GemvOutput output;
  int m, n, k;
};

void run_case(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << weight_format_name(c.format) << " input "
                                    << static_cast<int>(c.input) << " output "
                                    << static_cast<int>(c.output) << " m " << c.m << " n "
                                    << c.n << " k " << c.k);
  const bool swiglu = c.output == GemvOutput::kSwiglu;
  const bool norm = c.input == GemvInput::kRmsNorm;
  const int w_rows = swiglu ? 2 * c.n : c.n;
  QuantWeight w = make_weight(c.format, w_rows, c.k, rng);
  const int x_rows = norm ? c.m + 3 : c.m;
  std::vector<int32_t> rows;
  for (int r = 0; r < c.m; ++r) rows.push_back((r * 5 + 2) % x_rows);
  std::vector<float> x_values;
  std::vector<uint16_t> x_bits;
  std::normal_distribution<float> dist(0.f, 2.f);
  if (norm) {
    for (int i = 0; i < x_rows * c.k; ++i) x_values.push_back(dist(rng));
  } else {
    const testing::Bf16Data x = random_bf16(static_cast<size_t>(c.m) * c.k, 1.f, rng);
    x_values = x.values;
    x_bits = x.bits;
  }
  std::vector<float> gamma(c.k);
  for (float& g : gamma) g = 1.f + 0.1f * dist(rng);
  const bool fp32_out = c.output == GemvOutput::kFp32 || c.output == GemvOutput::kFp32Accumulate;
  std::vector<float> y_start(static_cast<size_t>(c.m) * c.n);
  for (float& v : y_start) v = dist(rng);

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
  p.w = w.device.get();
  p.w_format = c.format;
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
  ASSERT_TRUE(quant_gemv_cpu(r, c.format, w.ggml.data()).ok());
  // g and u of SwiGLU (fp32, before rounding), from the reference on each half.
  std::vector<float> g(ref.size()), u(ref.size());
  if (swiglu) {
    GemvCpuParams h = r;
    h.output = GemvOutput::kFp32;
    h.y = g.data();
    ASSERT_TRUE(quant_gemv_cpu(h, c.format, w.ggml.data()).ok());
    h.y = u.data();
    const std::vector<uint8_t> up(w.ggml.begin() + w.ggml.size() / 2, w.ggml.end());
    ASSERT_TRUE(quant_gemv_cpu(h, c.format, up.data()).ok());
  }
  const Bounds b = bounds(r, w.values, w_rows);
  double err_sum = 0, s_sum = 0;
  int bad = 0;
  for (int row = 0; row < c.m; ++row) {
    for (int j = 0; j < c.n; ++j) {
      const size_t i = static_cast<size_t>(row) * c.n + j;
      auto input_err = [&](int w_row) {
        const size_t at = static_cast<size_t>(row) * w_rows + w_row;
        return 0x1p-16 * b.s[at] + (norm ? b.flip[at] : 0.0);
      };
      double tol;
      if (swiglu) {
        const double dg = input_err(j) + 0x1p-8 * std::fabs(g[i]);
        const double du = input_err(c.n + j) + 0x1p-8 * std::fabs(u[i]);
        tol = 1.1 * dg * std::fabs(u[i]) + (std::fabs(g[i]) + 0.3) * du + dg * du;
      } else {
        tol = input_err(j);
      }
      tol += (fp32_out ? 0x1p-20 : 0x1p-8) * std::fabs(ref[i]) + 1e-6;
      const double err = std::fabs(double{got[i]} - ref[i]);
      err_sum += err;
      s_sum += b.s[static_cast<size_t>(row) * w_rows + j];
      if (!(err <= tol) && ++bad <= 5) {
        ADD_FAILURE() << "y[" << row << ", " << j << "] = " << got[i] << ", reference "
                      << ref[i] << ", tol " << tol;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  if (norm && !swiglu) {
    EXPECT_LE(err_sum, 0x1p-12 * s_sum) << "rounding flips are not rare";
  }
}

TEST(QuantGemvCuda, EveryFormatInputOutputAndRowBucketMatchesTheReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // in every failure's trace: rerunnable
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (WeightFormat f : quant::kQuantFormats) {
    for (GemvInput in : {GemvInput::kBf16, GemvInput::kRmsNorm}) {
      for (GemvOutput out : {GemvOutput::kBf16, GemvOutput::kFp32, GemvOutput::kFp32Accumulate,
                             GemvOutput::kSwiglu}) {
        for (int m : {1, 2, 3, 8}) {
          // k = 1280: 40 units, a second pass with 8 lanes; odd n: the last pair stores once.
          run_case({f, in, out, m, 37, 1280}, rng);
          // k = 4352: 136 units, several unrolled passes and a partial one.
          run_case({f, in, out, m, 300, 4352}, rng);
        }
      }
    }
  }
}

// The largest shapes the kernel stages: m = 8 at Llama 3 8B's down projection (k = 14336),
// which takes 154 KB of shared memory.
TEST(QuantGemvCuda, LargestStagedShapeMatchesTheReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // in every failure's trace: rerunnable
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (WeightFormat f : {WeightFormat::kQ4_K, WeightFormat::kQ8_0}) {
    run_case({f, GemvInput::kBf16, GemvOutput::kFp32Accumulate, 8, 67, 14336}, rng);
    run_case({f, GemvInput::kRmsNorm, GemvOutput::kBf16, 5, 67, 14336}, rng);
  }
}

// The RoPE epilogue on quantized weights against the unfused composition on the GPU: the
// same quantized GEMV storing bf16 QKV, then rope_qkv_append (checked against the CPU in
// layers_cuda_test). Same numerics by construction (kernels/gemv_epilogue.cuh), so Q and K
// may differ by at most one bf16 ulp (a different contraction of the rotation), V is a
// bit-exact copy, and cache slots nobody owns stay poisoned. With f_qk != f_v the Q and K
// rows and the V rows are two weights in two formats, two launches (rope_first_col).
void run_rope_case(WeightFormat f_qk, WeightFormat f_v, int m, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << weight_format_name(f_qk) << " + "
                                    << weight_format_name(f_v) << " m " << m);
  const int head_dim = 64, heads = 9, kv_heads = 3, hidden = 768, block_size = 64;
  const int num_blocks = 3, n = (heads + 2 * kv_heads) * head_dim;
  const int n_qk = f_qk == f_v ? n : (heads + kv_heads) * head_dim;
  struct Part {
    QuantWeight w;
    WeightFormat f;
    int first, n;
  };
  std::vector<Part> parts;
  parts.push_back({make_weight(f_qk, n_qk, hidden, rng), f_qk, 0, n_qk});
  if (n_qk < n) parts.push_back({make_weight(f_v, n - n_qk, hidden, rng), f_v, n_qk, n - n_qk});
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
  DeviceBuffer d_x = DeviceBuffer::from(x), d_gamma = DeviceBuffer::from(gamma);
  DeviceBuffer d_cos = DeviceBuffer::from(cos), d_sin = DeviceBuffer::from(sin);
  DeviceBuffer d_pos = DeviceBuffer::from(positions), d_slots = DeviceBuffer::from(slots);
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
  // Fused: one launch per part. Unfused: each part's bf16 QKV columns, assembled on the host.
  std::vector<uint16_t> qkv_host(static_cast<size_t>(m) * n);
  for (const Part& part : parts) {
    GemvParams p;
    p.input = GemvInput::kRmsNorm;
    p.x = d_x.get();
    p.norm_weight = d_gamma.get<float>();
    p.eps = 1e-5f;
    p.w = part.w.device.get();
    p.w_format = part.f;
    p.m = m;
    p.n = part.n;
    p.k = hidden;
    p.output = GemvOutput::kRopeAppend;
    p.rope = rope[0];
    p.rope_first_col = part.first;
    ASSERT_TRUE(gemv(p, 132, nullptr).ok());
    DeviceBuffer y(static_cast<size_t>(m) * part.n * 2);
    p.output = GemvOutput::kBf16;
    p.y = y.get();
    ASSERT_TRUE(gemv(p, 132, nullptr).ok());
    const std::vector<uint16_t> cols = y.to_host<uint16_t>();
    for (int t = 0; t < m; ++t) {
      for (int j = 0; j < part.n; ++j) qkv_host[t * static_cast<size_t>(n) + part.first + j] =
            cols[t * static_cast<size_t>(part.n) + j];
    }
  }
  qkv = DeviceBuffer::from(qkv_host);
  rope[1].qkv = qkv.get();
  ASSERT_TRUE(rope_qkv_append(rope[1], nullptr).ok());
  auto floats = [](const DeviceBuffer& b) {
    std::vector<float> out;
    for (uint16_t bits : b.to_host<uint16_t>()) out.push_back(bf16_bits_to_fp32(bits));
    return out;
  };
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
  const std::vector<float> q0 = floats(q[0]), q1 = floats(q[1]);
  const std::vector<float> k0 = floats(k[0]), k1 = floats(k[1]);
  const std::vector<float> v0 = floats(v[0]), v1 = floats(v[1]);
  for (size_t i = 0; i < q0.size(); ++i) check(q0[i], q1[i], "q", i);
  for (size_t i = 0; i < k0.size(); ++i) check(k0[i], k1[i], "k_cache", i);
  for (size_t i = 0; i < v0.size(); ++i) {
    if ((std::isnan(v1[i]) ? !std::isnan(v0[i]) : v0[i] != v1[i]) && ++bad <= 5) {
      ADD_FAILURE() << "v_cache[" << i << "] = " << v0[i] << ", unfused " << v1[i];
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantGemvCuda, RopeEpilogueMatchesGemvThenRopeAppend) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // in every failure's trace: rerunnable
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int m : {1, 3, 8}) {
    for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_K, WeightFormat::kQ6_K}) {
      run_rope_case(f, f, m, rng);
    }
    run_rope_case(WeightFormat::kQ4_K, WeightFormat::kQ6_K, m, rng);  // Q4_K_M's mixed QKV
    run_rope_case(WeightFormat::kQ4_0, WeightFormat::kQ8_0, m, rng);
  }
}

// round_activations_q8: every unit of 32 becomes bf16(dx * q) with quantize_q8_cpu's dx and
// q, bit for bit (zeros, a unit of one value and large magnitudes included). The kernel
// rounds a unit with four lanes of a warp: k = 96 gives rows of 12 lanes' chunks, so warps
// straddle rows and the last warp is partly idle.
TEST(QuantGemvCuda, RoundActivationsMatchesTheGemvQuantization) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // in every failure's trace: rerunnable
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const auto& [rows, k] : {std::pair{13, 2048}, std::pair{5, 96}}) {
    SCOPED_TRACE(::testing::Message() << rows << " rows of " << k);
    std::vector<uint16_t> bits(static_cast<size_t>(rows) * k);
    for (size_t i = 0; i < bits.size(); ++i) {
      float v = normal(rng) * (i % 7 == 0 ? 300.f : 1.f);
      if (i / 32 == 5) v = 0.f;                          // a zero unit
      if (i / 32 == 9) v = (i % 32 == 3) ? 2.5f : 0.f;  // one non-zero value
      bits[i] = fp32_to_bf16_bits(v);
    }
    DeviceBuffer d = DeviceBuffer::from(bits);
    ASSERT_TRUE(round_activations_q8(d.get(), rows, k, nullptr).ok());
    const std::vector<uint16_t> got = d.to_host<uint16_t>();
    std::vector<float> x(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) x[i] = bf16_bits_to_fp32(bits[i]);
    std::vector<int8_t> q(k);
    std::vector<float> dx(k / 32);
    int bad = 0;
    for (int r = 0; r < rows; ++r) {
      quantize_q8_cpu(x.data() + static_cast<size_t>(r) * k, k, q.data(), dx.data());
      for (int i = 0; i < k; ++i) {
        const uint16_t want = fp32_to_bf16_bits(dx[i / 32] * static_cast<float>(q[i]));
        if (got[static_cast<size_t>(r) * k + i] != want && ++bad <= 5) {
          ADD_FAILURE() << "row " << r << " element " << i << ": "
                        << bf16_bits_to_fp32(got[static_cast<size_t>(r) * k + i])
                        << ", expected " << bf16_bits_to_fp32(want);
        }
      }
    }
    EXPECT_EQ(bad, 0);
    EXPECT_FALSE(round_activations_q8(d.get(), rows, 100, nullptr).ok());  // k not whole units
  }
}

// RMSNorm and SwiGLU with round_q8 write what they write without it followed by
// round_activations_q8, bit for bit (the fused form feeds the native GEMMs), including units
// that are all zero and units with one large value; round_q8 with a dim or ffn_size that is
// not a multiple of 32 is refused. Both round a unit over lanes of a warp (8 and 4): dim 576
// leaves the norm's last pass half a warp, ffn_size 1504 puts row ends inside a warp.
TEST(QuantGemvCuda, NormAndSwigluRoundQ8MatchTheRoundingKernel) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int rows = 7;
  for (const int dim : {4096, 576}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    std::vector<float> x(static_cast<size_t>(rows) * dim), weight(dim);
    for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (i % 97 == 0 ? 40.f : 1.f);
    for (int i = 0; i < dim; ++i) weight[i] = (i / 32 == 3) ? 0.f : 1.f + 0.1f * normal(rng);
    const std::vector<int32_t> gather = {4, 0, 6, 6, 2};  // the LM head's gathered rows
    DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(weight);
    DeviceBuffer drows = DeviceBuffer::from(gather);
    for (const bool gathered : {false, true}) {
      const int n = gathered ? static_cast<int>(gather.size()) : rows;
      DeviceBuffer want(static_cast<size_t>(n) * dim * 2), got(static_cast<size_t>(n) * dim * 2);
      RmsNormParams p;
      p.dtype = DType::kBf16;
      p.x = dx.get<float>();
      p.rows = gathered ? drows.get<int32_t>() : nullptr;
      p.weight = dw.get<float>();
      p.num_rows = n;
      p.dim = dim;
      p.eps = 1e-5f;
      p.out = want.get();
      ASSERT_TRUE(rmsnorm(p, nullptr).ok());
      ASSERT_TRUE(round_activations_q8(want.get(), n, dim, nullptr).ok());
      p.out = got.get();
      p.round_q8 = true;
      ASSERT_TRUE(rmsnorm(p, nullptr).ok());
      EXPECT_EQ(got.to_host<uint16_t>(), want.to_host<uint16_t>()) << "rmsnorm, gathered " << gathered;
    }
  }
  for (const int ffn : {1536, 1504}) {
    SCOPED_TRACE(::testing::Message() << "ffn_size " << ffn);
    std::vector<uint16_t> gate_up(static_cast<size_t>(rows) * 2 * ffn);
    for (size_t i = 0; i < gate_up.size(); ++i) {
      const bool zero_unit = (i % (2 * ffn)) / 32 == 7;  // gate and up of unit 7 zero
      gate_up[i] = fp32_to_bf16_bits(zero_unit ? 0.f : normal(rng) * (i % 89 == 0 ? 30.f : 2.f));
    }
    DeviceBuffer dgu = DeviceBuffer::from(gate_up);
    DeviceBuffer want(static_cast<size_t>(rows) * ffn * 2), got(static_cast<size_t>(rows) * ffn * 2);
    SwigluParams a;
    a.dtype = DType::kBf16;
    a.gate_up = dgu.get();
    a.num_rows = rows;
    a.ffn_size = ffn;
    a.out = want.get();
    ASSERT_TRUE(swiglu(a, nullptr).ok());
    ASSERT_TRUE(round_activations_q8(want.get(), rows, ffn, nullptr).ok());
    a.out = got.get();
    a.round_q8 = true;
    ASSERT_TRUE(swiglu(a, nullptr).ok());
    EXPECT_EQ(got.to_host<uint16_t>(), want.to_host<uint16_t>()) << "swiglu";
    a.ffn_size = ffn - 16;
    a.num_rows = 1;
    EXPECT_FALSE(swiglu(a, nullptr).ok());
  }
  std::vector<float> x(64), weight(64, 1.f);
  DeviceBuffer dx = DeviceBuffer::from(x), dw = DeviceBuffer::from(weight);
  RmsNormParams bad;
  bad.x = dx.get<float>();
  bad.weight = dw.get<float>();
  bad.out = dx.get();
  bad.num_rows = 1;
  bad.dim = 100;
  bad.round_q8 = true;
  EXPECT_FALSE(rmsnorm(bad, nullptr).ok());
}

// dequantize_bf16 against ggml's fp32 values, bit for bit (rounded to bf16, or exact with
// out_fp32); the rest of the (poisoned) output buffer untouched. The cases cover a row range
// whose units end mid-batch (the kernel's batches of 32 units, one a warp below 2^18 units,
// 4 (Q8_0: 2) a warp from there: one case past that line), rows shorter
// than a batch (k = 256: eight units a row, so a batch straddles four rows; k = 32 for the
// 32-element formats: one unit a row), several blocks, and gathers (repeated and
// out-of-order ids) in bf16 and fp32.
struct DequantCase {
  int rows, k, begin, end;
  bool gather, fp32;
};

void run_dequant_case(WeightFormat f, const DequantCase& c, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << weight_format_name(f) << " rows " << c.rows << " k "
                                    << c.k << " [" << c.begin << ", " << c.end << ") gather "
                                    << c.gather << " fp32 " << c.fp32);
  QuantWeight w = make_weight(f, c.rows, c.k, rng);
  const int out_rows = c.end - c.begin;
  std::vector<int32_t> ids(out_rows);
  std::uniform_int_distribution<int32_t> pick(0, c.rows - 1);
  for (int i = 0; i < out_rows; ++i) ids[i] = c.gather ? pick(rng) : c.begin + i;
  if (c.gather && out_rows > 1) ids[1] = ids[0];  // a repeated id
  DeviceBuffer d_ids = DeviceBuffer::from(ids);
  const size_t count = static_cast<size_t>(out_rows) * c.k, guard = 4096;
  const size_t elem = c.fp32 ? 4 : 2;
  DeviceBuffer out((count + guard) * elem);
  out.poison();
  DequantizeParams p;
  p.format = f;
  p.w = w.device.get();
  p.num_rows = c.rows;
  p.k = c.k;
  p.row_begin = c.gather ? 0 : c.begin;
  p.row_end = c.gather ? out_rows : c.end;
  p.row_ids = c.gather ? d_ids.get<int32_t>() : nullptr;
  p.out = out.get();
  p.out_fp32 = c.fp32;
  ASSERT_TRUE(dequantize_bf16(p, nullptr).ok());
  std::vector<float> got(count + guard);
  if (c.fp32) {
    got = out.to_host<float>();
  } else {
    const std::vector<uint16_t> bits = out.to_host<uint16_t>();
    for (size_t i = 0; i < got.size(); ++i) got[i] = bf16_bits_to_fp32(bits[i]);
  }
  int bad = 0;
  for (size_t i = 0; i < count; ++i) {
    const float ggml = w.values[static_cast<size_t>(ids[i / c.k]) * c.k + i % c.k];
    const float want = c.fp32 ? ggml : bf16_bits_to_fp32(fp32_to_bf16_bits(ggml));
    if (std::memcmp(&got[i], &want, 4) != 0 && ++bad <= 5) {
      ADD_FAILURE() << "element " << i << ": " << got[i] << ", ggml " << ggml;
    }
  }
  for (size_t i = count; i < count + guard; ++i) {
    if (!std::isnan(got[i]) && ++bad <= 5) ADD_FAILURE() << "guard " << i << " written";
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantGemvCuda, DequantizeMatchesGgmlBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();  // in every failure's trace: rerunnable
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (WeightFormat f : quant::kQuantFormats) {
    const int block = static_cast<int>(weight_block_elements(f));
    const DequantCase cases[] = {
        {37, 1280, 5, 30, false, false},     // 40 units a row, 1,000 units: ends mid-batch
        {301, 2048, 0, 301, false, false},   // 19,264 units: many blocks
        {75, block, 3, 72, false, false},    // rows shorter than a batch
        {40, 512, 0, 23, true, false},       // a gather
        {40, 512, 0, 23, true, true},        // the embedding lookup: gather, fp32
        {19, 1280, 2, 17, false, true},      // fp32, a range
        {2053, 4096, 1, 2053, false, false}, // 262,656 units: several batches a warp
    };
    for (const DequantCase& c : cases) run_dequant_case(f, c, rng);
  }
}

// dequantize_bf16_batch: jobs of every format in one launch (sizes that end mid-batch, a
// row range, one unit a row), each output bit for bit ggml's value rounded to bf16, written
// back to back into one buffer as a layer's matrices are, the guard past them untouched.
TEST(QuantGemvCuda, DequantizeBatchMatchesGgmlBitForBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  struct Job {
    WeightFormat f;
    int rows, k, begin, end;
  };
  const Job spec[] = {{WeightFormat::kQ4_K, 37, 1280, 0, 37},
                      {WeightFormat::kQ6_K, 20, 512, 3, 19},
                      {WeightFormat::kQ8_0, 301, 2048, 0, 301},
                      {WeightFormat::kQ4_1, 75, 32, 1, 74},
                      {WeightFormat::kQ4_0, 9, 96, 0, 9},
                      {WeightFormat::kQ5_K, 64, 768, 0, 64}};
  std::vector<QuantWeight> weights;
  std::vector<DequantizeParams> jobs;
  size_t total = 0;
  for (const Job& j : spec) total += static_cast<size_t>(j.end - j.begin) * j.k;
  const size_t guard = 4096;
  DeviceBuffer out((total + guard) * 2);
  out.poison();
  size_t at = 0;
  for (const Job& j : spec) {
    weights.push_back(make_weight(j.f, j.rows, j.k, rng));
    DequantizeParams p;
    p.format = j.f;
    p.w = weights.back().device.get();
    p.num_rows = j.rows;
    p.k = j.k;
    p.row_begin = j.begin;
    p.row_end = j.end;
    p.out = out.get<uint16_t>() + at;
    jobs.push_back(p);
    at += static_cast<size_t>(j.end - j.begin) * j.k;
  }
  ASSERT_TRUE(dequantize_bf16_batch(jobs.data(), static_cast<int>(jobs.size()), nullptr).ok());
  const std::vector<uint16_t> bits = out.to_host<uint16_t>();
  int bad = 0;
  at = 0;
  for (size_t n = 0; n < std::size(spec); ++n) {
    const Job& j = spec[n];
    const size_t count = static_cast<size_t>(j.end - j.begin) * j.k;
    for (size_t i = 0; i < count; ++i) {
      const float ggml = weights[n].values[static_cast<size_t>(j.begin) * j.k + i];
      if (bits[at + i] != fp32_to_bf16_bits(ggml) && ++bad <= 5) {
        ADD_FAILURE() << weight_format_name(j.f) << " job " << n << " element " << i << ": "
                      << bf16_bits_to_fp32(bits[at + i]) << ", ggml " << ggml;
      }
    }
    at += count;
  }
  for (size_t i = total; i < total + guard; ++i) {
    if (!std::isnan(bf16_bits_to_fp32(bits[i])) && ++bad <= 5) ADD_FAILURE() << "guard " << i;
  }
  EXPECT_EQ(bad, 0);

  // Refused, naming the job: a gather, fp32 output, a bad range; too many or no jobs.
  DequantizeParams bad_jobs[2] = {jobs[0], jobs[1]};
  bad_jobs[1].out_fp32 = true;
  absl::Status s = dequantize_bf16_batch(bad_jobs, 2, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("job 1"), std::string::npos) << s;
  bad_jobs[1] = jobs[1];
  bad_jobs[1].row_end = 21;  // past num_rows
  s = dequantize_bf16_batch(bad_jobs, 2, nullptr);
  EXPECT_NE(s.message().find("job 1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[3, 21)"), std::string::npos) << s;
  std::vector<DequantizeParams> many(kMaxDequantJobs + 1, jobs[0]);
  EXPECT_EQ(dequantize_bf16_batch(many.data(), kMaxDequantJobs + 1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dequantize_bf16_batch(jobs.data(), 0, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(QuantGemvCuda, RejectsUnsupportedShapesNamingThem) {
  GemvParams p;
  p.w_format = WeightFormat::kQ4_K;
  p.m = 1;
  p.n = 16;
  p.k = 800;  // not a whole number of 256-element blocks
  const absl::Status s = gemv(p, 132, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("k 800"), std::string::npos) << s;
  EXPECT_NE(s.message().find("Q4_K"), std::string::npos) << s;
  EXPECT_FALSE(gemv_supported(WeightFormat::kQ4_0, 9, 4096));      // m past kGemvMaxRows
  EXPECT_FALSE(gemv_supported(WeightFormat::kQ8_0, 1, 4100));      // k not whole blocks
  EXPECT_FALSE(gemv_supported(WeightFormat::kQ4_K, 8, 16384));     // staged rows too large
  EXPECT_TRUE(gemv_supported(WeightFormat::kQ4_K, 8, 14336));      // 8B down projection
  EXPECT_TRUE(gemv_supported(WeightFormat::kQ6_K, 1, 14336));
  DequantizeParams d;
  d.format = WeightFormat::kQ6_K;
  d.num_rows = 10;
  d.k = 512;
  d.row_begin = 4;
  d.row_end = 11;  // past num_rows
  const absl::Status ds = dequantize_bf16(d, nullptr);
  EXPECT_EQ(ds.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ds.message().find("[4, 11)"), std::string::npos) << ds;
}

}  // namespace
}  // namespace flashserve::kernels
