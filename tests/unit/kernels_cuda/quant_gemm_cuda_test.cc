// The tensor-core GEMM on quantized weights (kernels/quant/quant_gemm.h) against its fp32
// reference (kernels/cpu/quant.h quant_gemm_cpu: the weights as dequantize_gemm_cpu decodes
// them, bit for bit what the kernel multiplies; products summed in double) on random ggml blocks repacked by quant_repack, for every
// format x output x token tile x split of k (forced through m and num_sms: the launcher
// splits k where the tiles would not fill every SM), with m, n and k that end mid-tile and
// mid-stage; every kernel (QuantGemmKernel::kMmaSync everywhere, the warp-specialized
// wgmma kernel kWgmmaWs on Hopper).
//
// Tolerance, per output, from S = sum |w^ x| over the row (both sides multiply the same bf16
// values): the GPU sums the exact products in fp32 (the mma's accumulator) in another order,
// < k * 2^-24 * S (split or not), and k <= 4,096 here: 2^-12 * S covers it; plus, for a bf16
// output, one bf16 rounding on each side that may land on neighbours (2^-7 |ref|). A wrong
// nibble moves an output by |w x| ~ S / k (> 2^-11 S at the k <= 1,280 cases, which pin the
// decoding); a misplaced, missing or wrongly scaled unit by ~sqrt(32) S / k or more, outside
// at k = 4,096 too. Outputs are poisoned (NaN) first; kFp32Accumulate starts from
// data, and columns past n of a wider y (ldy > n) must stay untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/quant.h"
#include "kernels/device.h"
#include "kernels/quant/quant_gemm.h"
#include "kernels/quant/quant_unit.h"
#include "tests/unit/kernels_cuda/attention_problem.h"
#include "tests/unit/kernels_cuda/quant_weight.h"

namespace flashserve::kernels {
namespace {

using ::flashserve::bf16_bits_to_fp32;
using testing::DeviceBuffer;
using testing::make_weight;
using testing::QuantWeight;
using testing::random_bf16;

struct Case {
  WeightFormat format;
  GemvOutput output;
  int m, n, k;
  int num_sms;     // the launcher's tile and split choice
  bool partials;   // scratch for split-k partial sums given
  QuantGemmKernel kernel = QuantGemmKernel::kMmaSync;
  int token_tile = 0;  // kWgmmaWs: forced 64, 128 or 256 (kNarrow 16, 32, 64); 0 = the launcher's
  int row_tile = 0;    // kNarrow: forced 16 or 32; 0 = the launcher's choice
};

void run_case(const Case& c, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message() << weight_format_name(c.format) << " output "
                                    << static_cast<int>(c.output) << " m " << c.m << " n "
                                    << c.n << " k " << c.k << " sms " << c.num_sms
                                    << (c.partials ? " with partials" : "")
                                    << " kernel " << static_cast<int>(c.kernel)
                                    << " token tile " << c.token_tile << " row tile "
                                    << c.row_tile);
  QuantWeight w = make_weight(c.format, c.n, c.k, rng);
  const testing::Bf16Data x = random_bf16(static_cast<size_t>(c.m) * c.k, 1.f, rng);
  const bool fp32_out = c.output != GemvOutput::kBf16;
  const int ldy = c.n + 8;  // a wider y: columns [n, ldy) belong to someone else
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<float> y_start(static_cast<size_t>(c.m) * ldy);
  for (float& v : y_start) v = dist(rng);

  DeviceBuffer d_x = DeviceBuffer::from(x.bits);
  DeviceBuffer d_y = fp32_out ? DeviceBuffer::from(y_start)
                              : DeviceBuffer(static_cast<size_t>(c.m) * ldy * 2);
  if (c.output != GemvOutput::kFp32Accumulate) d_y.poison();
  const int64_t partials_floats = c.partials ? quant_gemm_partials_floats(c.num_sms) : 0;
  DeviceBuffer d_partials(static_cast<size_t>(std::max<int64_t>(partials_floats, 1)) * 4);
  d_partials.poison();
  QuantGemmParams p;
  p.format = c.format;
  p.w = w.device.get();
  p.x = d_x.get();
  p.output = c.output;
  p.y = d_y.get();
  p.ldy = ldy;
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.partials = c.partials ? d_partials.get<float>() : nullptr;
  p.partials_floats = partials_floats;
  p.kernel = c.kernel;
  p.token_tile = c.token_tile;
  p.row_tile = c.row_tile;
  int splits = 0;
  ASSERT_TRUE(quant_gemm(p, c.num_sms, nullptr, &splits).ok());
  if (c.kernel == QuantGemmKernel::kNarrow) EXPECT_EQ(splits, 1);  // it never splits k
  std::vector<float> got;
  if (fp32_out) {
    got = d_y.to_host<float>();
  } else {
    for (uint16_t b : d_y.to_host<uint16_t>()) got.push_back(bf16_bits_to_fp32(b));
  }

  // The reference on a dense [m, n] y.
  std::vector<float> ref(static_cast<size_t>(c.m) * c.n);
  for (int r = 0; r < c.m; ++r) {
    for (int j = 0; j < c.n; ++j) ref[r * c.n + j] = y_start[static_cast<size_t>(r) * ldy + j];
  }
  GemvCpuParams r;
  r.x = x.values.data();
  r.output = c.output;
  r.y = ref.data();
  r.m = c.m;
  r.n = c.n;
  r.k = c.k;
  ASSERT_TRUE(quant_gemm_cpu(r, c.format, w.ggml.data()).ok());

  std::vector<float> w_gemm(static_cast<size_t>(c.n) * c.k);
  ASSERT_TRUE(dequantize_gemm_cpu(c.format, w.ggml.data(), int64_t{c.n} * c.k, w_gemm.data()).ok());
  int bad = 0;
  for (int row = 0; row < c.m; ++row) {
    for (int j = 0; j < ldy; ++j) {
      const float g = got[static_cast<size_t>(row) * ldy + j];
      if (j >= c.n) {  // untouched: still the start value (fp32) or the poison (bf16)
        const bool untouched = c.output == GemvOutput::kFp32Accumulate
                                   ? g == y_start[static_cast<size_t>(row) * ldy + j]
                                   : std::isnan(g);
        if (!untouched && ++bad <= 5) ADD_FAILURE() << "wrote past n at " << row << ", " << j;
        continue;
      }
      double s = 0;
      for (int i = 0; i < c.k; ++i) {
        s += std::fabs(double{w_gemm[static_cast<size_t>(j) * c.k + i]} *
                       x.values[static_cast<size_t>(row) * c.k + i]);
      }
      const float want = ref[static_cast<size_t>(row) * c.n + j];
      const double tol = 0x1p-12 * s + (fp32_out ? 0x1p-22 : 0x1p-7) * std::fabs(want);
      if (!(std::fabs(double{g} - want) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << "y[" << row << ", " << j << "] = " << g << ", want " << want
                      << " (tolerance " << tol << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantGemmCuda, EveryFormatOutputTileAndSplitMatchesTheReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  for (WeightFormat f : quant::kQuantFormats) {
    const bool k_quant = weight_block_elements(f) == kQuantSuperBlock;
    // k: 608 = 19 units (4 stages of 128 and a part stage); K-quants: 1,280 = 5 blocks.
    const int k = k_quant ? 1280 : 608;
    for (GemvOutput out : {GemvOutput::kBf16, GemvOutput::kFp32, GemvOutput::kFp32Accumulate}) {
      // n = 136: a full 128-row tile and 8 rows of a second. m = 300: 64-token tiles, the
      // last ending mid-tile; on 1,000 SMs the K-quants' k splits in two.
      run_case({f, out, 300, 136, k, 1, true}, rng);
      run_case({f, out, 300, 136, k, 1000, true}, rng);
      run_case({f, out, 20, 136, k, 132, false}, rng);  // 32-token tile, no split
      // One step past the GEMV's largest m on a 4,096-long k (32 stages): split in 8, in
      // fewer where the scratch is short, and not at all without one.
      run_case({f, out, 9, 70, 4096, 132, true}, rng);
      run_case({f, out, 9, 70, 4096, 2, true}, rng);
      run_case({f, out, 9, 70, 4096, 132, false}, rng);
    }
  }
}

// The wgmma kernel (Hopper): 64-, 128- and 256-token tiles (m <= 64, <= 128, past 128; the
// last with setmaxnreg), m ending mid-tile (65, 130, 200, 257,
// 300) and on it (64, 256, 1,024), n = 264 (two full 128-row tiles and 8 rows of a
// third, whose m64 tiles are then partly empty) and 136, k ending mid-stage (608: 9.5
// stages) or on whole K-quant blocks; k split (1,000 SMs; 132 SMs at k = 4,096: splits of 4
// stages, fewer than the warp-specialized ring's lag) or not (1 SM, or no scratch; k = 4,096
// on 1 SM: 64 stages, several rounds of any ring).
void run_wgmma_cases(QuantGemmKernel kW) {
  std::mt19937 rng(std::random_device{}());
  for (WeightFormat f : quant::kQuantFormats) {
    const bool k_quant = weight_block_elements(f) == kQuantSuperBlock;
    const int k = k_quant ? 1280 : 608;
    for (GemvOutput out : {GemvOutput::kBf16, GemvOutput::kFp32, GemvOutput::kFp32Accumulate}) {
      run_case({f, out, 65, 264, k, 1, true, kW}, rng);
      run_case({f, out, 300, 136, k, 1000, true, kW}, rng);
      run_case({f, out, 64, 264, k, 1000, true, kW}, rng);
    }
    run_case({f, GemvOutput::kBf16, 200, 264, k, 132, false, kW}, rng);
    run_case({f, GemvOutput::kFp32, 256, 136, k, 132, true, kW}, rng);
    run_case({f, GemvOutput::kFp32, 1024, 72, k, 1, true, kW}, rng);
    run_case({f, GemvOutput::kFp32Accumulate, 9, 70, 4096, 132, true, kW}, rng);
    run_case({f, GemvOutput::kBf16, 130, 264, 4096, 132, true, kW}, rng);
    run_case({f, GemvOutput::kFp32, 64, 136, 4096, 1, true, kW}, rng);
    run_case({f, GemvOutput::kFp32Accumulate, 257, 136, 4096, 1, true, kW}, rng);
    // Each token tile forced where the launcher would take another: 64-token tiles over 300
    // tokens (five, the last part-empty) split and not, 128 over 200, 256 over 65.
    run_case({f, GemvOutput::kBf16, 300, 136, k, 132, true, kW, 64}, rng);
    run_case({f, GemvOutput::kFp32, 300, 264, k, 1, false, kW, 64}, rng);
    run_case({f, GemvOutput::kFp32Accumulate, 200, 136, k, 1000, true, kW, 128}, rng);
    run_case({f, GemvOutput::kBf16, 65, 264, k, 132, true, kW, 256}, rng);
  }
}

// The warp-specialized wgmma kernel (a producer warpgroup, two consumer warpgroups,
// mbarriers, TMA).
TEST(QuantGemmCuda, WarpSpecializedWgmmaKernelEveryFormatOutputTileAndSplitMatchesTheReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  if (!quant_gemm_wgmma_supported()) GTEST_SKIP() << "not a Hopper GPU";
  run_wgmma_cases(QuantGemmKernel::kWgmmaWs);
}

// The narrow kernel (small matrices at small m; any sm_80+ GPU): every format and output, m
// from past the GEMV (9) to past its auto range (100, 64-token tiles ending mid-tile), n
// ending mid-tile (136 = 4 x 32 + 8, 70), k of one unit a warp (256), of units the eight warps
// share unevenly (608 = 19 units; K-quants 1,280 = 40) and of fewer units than warps (32: seven
// warps idle; K-quants 256); every tile forced once; the launcher's own tile on 132 SMs and
// on 1. The auto choice (QuantGemmKernel::kAuto on a SmolLM2-sized matrix) is this kernel.
TEST(QuantGemmCuda, NarrowKernelEveryFormatOutputAndTileMatchesTheReference) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  constexpr QuantGemmKernel kN = QuantGemmKernel::kNarrow;
  for (WeightFormat f : quant::kQuantFormats) {
    const bool k_quant = weight_block_elements(f) == kQuantSuperBlock;
    const int k = k_quant ? 1280 : 608, k_short = k_quant ? 256 : 32;
    for (GemvOutput out : {GemvOutput::kBf16, GemvOutput::kFp32, GemvOutput::kFp32Accumulate}) {
      run_case({f, out, 64, 136, k, 132, false, kN}, rng);
      run_case({f, out, 9, 70, k, 1, false, kN}, rng);
      run_case({f, out, 100, 136, 256, 132, true, kN}, rng);
      run_case({f, out, 40, 70, k_short, 132, false, kN}, rng);
    }
    for (const int rows : {16, 32}) {
      for (const int tokens : {16, 32, 64}) {
        run_case({f, GemvOutput::kFp32, 57, 136, k, 132, false, kN, tokens, rows}, rng);
      }
    }
    run_case({f, GemvOutput::kBf16, 64, 200, k, 132, true, QuantGemmKernel::kAuto}, rng);
  }
}

// defer_reduction: y untouched where k was split (still the poison, or the fp32 start values
// for kFp32Accumulate), the reported split count the same as without deferring, and
// quant_gemm_reduce() over the partials left gives the non-deferred y bit for bit; with one
// split y is written as usual. Every kernel the device runs, every output rule; m = 64 of a
// 4,096-long k on 132 SMs splits with scratch for the partials and cannot without.
TEST(QuantGemmCuda, DeferredReductionLeavesYUntilQuantGemmReduceAddsIt) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(std::random_device{}());
  std::vector<QuantGemmKernel> kernels = {QuantGemmKernel::kMmaSync};
  if (quant_gemm_wgmma_supported()) kernels.push_back(QuantGemmKernel::kWgmmaWs);
  const int m = 64, n = 264, k = 4096, ldy = n + 8;
  QuantWeight w = make_weight(WeightFormat::kQ4_K, n, k, rng);
  const testing::Bf16Data x = random_bf16(static_cast<size_t>(m) * k, 1.f, rng);
  DeviceBuffer d_x = DeviceBuffer::from(x.bits);
  std::normal_distribution<float> dist(0.f, 2.f);
  std::vector<float> y_start(static_cast<size_t>(m) * ldy);
  for (float& v : y_start) v = dist(rng);
  for (QuantGemmKernel kernel : kernels) {
    for (GemvOutput out : {GemvOutput::kBf16, GemvOutput::kFp32, GemvOutput::kFp32Accumulate}) {
      for (const bool scratch : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "kernel " << static_cast<int>(kernel) << " output "
                                          << static_cast<int>(out) << " scratch " << scratch);
        const bool fp32 = out != GemvOutput::kBf16;
        auto fresh_y = [&] {
          DeviceBuffer y = fp32 ? DeviceBuffer::from(y_start)
                                : DeviceBuffer(static_cast<size_t>(m) * ldy * 2);
          if (out != GemvOutput::kFp32Accumulate) y.poison();
          return y;
        };
        DeviceBuffer want = fresh_y(), got = fresh_y(), untouched = fresh_y();
        const int64_t floats = scratch ? quant_gemm_partials_floats(132) : 0;
        DeviceBuffer partials(static_cast<size_t>(std::max<int64_t>(floats, 1)) * 4);
        QuantGemmParams p;
        p.format = WeightFormat::kQ4_K;
        p.w = w.device.get();
        p.x = d_x.get();
        p.output = out;
        p.ldy = ldy;
        p.m = m;
        p.n = n;
        p.k = k;
        p.partials = scratch ? partials.get<float>() : nullptr;
        p.partials_floats = floats;
        p.kernel = kernel;
        p.y = want.get();
        int splits = 0, deferred_splits = 0;
        ASSERT_TRUE(quant_gemm(p, 132, nullptr, &splits).ok());
        p.y = got.get();
        p.defer_reduction = true;
        ASSERT_TRUE(quant_gemm(p, 132, nullptr, &deferred_splits).ok());
        EXPECT_EQ(deferred_splits, splits);
        EXPECT_EQ(splits > 1, scratch) << splits << " splits";
        if (splits > 1) {
          EXPECT_EQ(got.to_host<uint32_t>(), untouched.to_host<uint32_t>()) << "y written";
          ASSERT_TRUE(quant_gemm_reduce(p, splits, nullptr).ok());
        }
        EXPECT_EQ(got.to_host<uint32_t>(), want.to_host<uint32_t>());
      }
    }
  }
  QuantGemmParams bad;  // partials too small for the splits: rejected, nothing launched
  bad.m = bad.n = bad.ldy = 4;
  bad.partials = reinterpret_cast<float*>(16);
  bad.y = reinterpret_cast<void*>(16);
  bad.partials_floats = 31;
  EXPECT_EQ(quant_gemm_reduce(bad, 2, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(quant_gemm_reduce(bad, 1, nullptr).ok());
}

TEST(QuantGemmCuda, RejectsUnsupportedShapesNamingThem) {
  QuantGemmParams p;
  p.format = WeightFormat::kQ5_K;
  p.m = 16;
  p.n = 32;
  p.k = 800;  // not a whole number of 256-element blocks
  p.ldy = 32;
  const absl::Status s = quant_gemm(p, 132, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("k 800"), std::string::npos) << s;
  EXPECT_NE(s.message().find("Q5_K"), std::string::npos) << s;
  p.k = 512;
  p.ldy = 31;  // narrower than n
  EXPECT_EQ(quant_gemm(p, 132, nullptr).code(), absl::StatusCode::kInvalidArgument);
  p.ldy = 32;
  p.output = GemvOutput::kSwiglu;
  const absl::Status o = quant_gemm(p, 132, nullptr);
  EXPECT_EQ(o.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.message().find("output"), std::string::npos) << o;
  p.output = GemvOutput::kBf16;
  for (const int tile : {32, 96, 512}) {  // not a tile of the wgmma kernel
    p.kernel = QuantGemmKernel::kWgmmaWs;
    p.token_tile = tile;
    const absl::Status t = quant_gemm(p, 132, nullptr);
    EXPECT_EQ(t.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(t.message().find("token tile"), std::string::npos) << t;
  }
  p.kernel = QuantGemmKernel::kMmaSync;  // which picks its own tiles
  p.token_tile = 64;
  EXPECT_EQ(quant_gemm(p, 132, nullptr).code(), absl::StatusCode::kInvalidArgument);
  p.token_tile = 0;
  p.row_tile = 16;  // a row tile is the narrow kernel's alone
  EXPECT_EQ(quant_gemm(p, 132, nullptr).code(), absl::StatusCode::kInvalidArgument);
  p.kernel = QuantGemmKernel::kNarrow;
  for (const int rows : {8, 64}) {
    p.row_tile = rows;
    const absl::Status r = quant_gemm(p, 132, nullptr);
    EXPECT_EQ(r.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.message().find("row tile"), std::string::npos) << r;
  }
  p.row_tile = 0;
  p.token_tile = 128;
  EXPECT_EQ(quant_gemm(p, 132, nullptr).code(), absl::StatusCode::kInvalidArgument);
  p.token_tile = 0;
  // k whose decoded rows do not fit the narrow kernel's shared memory, named (checked before
  // any pointer is read: none is set here).
  p.format = WeightFormat::kQ4_K;
  p.k = 8192;
  p.w = p.x = p.y = reinterpret_cast<void*>(256);
  EXPECT_FALSE(quant_gemm_narrow_supported(8192));
  EXPECT_TRUE(quant_gemm_narrow_supported(1536));
  const absl::Status longk = quant_gemm(p, 132, nullptr);
  EXPECT_EQ(longk.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(longk.message().find("k 8192"), std::string::npos) << longk;
  p.w = p.x = p.y = nullptr;
  p.format = WeightFormat::kQ5_K;
  p.k = 512;
  p.kernel = QuantGemmKernel::kAuto;
  p.token_tile = 0;
  if (cuda_device_count() > 0 && !quant_gemm_wgmma_supported()) {
    p.output = GemvOutput::kBf16;
    p.kernel = QuantGemmKernel::kWgmmaWs;
    const absl::Status ws = quant_gemm(p, 132, nullptr);
    EXPECT_EQ(ws.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(ws.message().find("Hopper"), std::string::npos) << ws;
  }
  EXPECT_FALSE(quant_gemm_supported(WeightFormat::kBf16, 512));
  EXPECT_FALSE(quant_gemm_supported(WeightFormat::kQ8_0, 40));
  EXPECT_TRUE(quant_gemm_supported(WeightFormat::kQ4_0, 576));
}

}  // namespace
}  // namespace flashserve::kernels
