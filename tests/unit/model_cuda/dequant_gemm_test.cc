// model/cuda/dequant_gemm.h: the chunk arithmetic (no GPU), and on a GPU the chunked
// dequantize + cuBLASLt against a double-precision reference on the bf16 weights the
// dequantize writes (ggml's values rounded to bf16), for two parts of different formats (the
// [wq; wk] + wv case), each split into several chunks, every output mode.
//
// Tolerance, per output, from S = sum |w x| over the row: cuBLASLt sums exact bf16 products
// in fp32 in its own order, < k * 2^-24 * S with k = 1,024 here, so 2^-12 * S; plus, for a
// bf16 output, one rounding on each side (2^-7 |ref|). A chunk multiplied into the wrong
// columns, a missing or doubled chunk, or a chunk dequantized from the wrong rows moves
// outputs by ~S / sqrt(k) or more.
#include "model/cuda/dequant_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/bf16.h"
#include "kernels/device.h"
#include "tests/unit/kernels_cuda/attention_problem.h"
#include "tests/unit/kernels_cuda/quant_weight.h"

namespace flashserve::model::cuda {
namespace {

using kernels::WeightFormat;
using kernels::testing::DeviceBuffer;
using kernels::testing::make_weight;
using kernels::testing::QuantWeight;

TEST(DequantChunkRows, EqualChunksOfWholeRowBlocksWithinTheBudget) {
  for (int64_t rows : {1, 100, 128, 129, 1000, 6144, 28672, 128256}) {
    for (int64_t k : {576, 2048, 4096, 14336}) {
      for (int64_t chunk : {int64_t{1} << 16, int64_t{1} << 20, int64_t{30} << 20,
                            int64_t{1} << 40}) {
        SCOPED_TRACE(::testing::Message() << rows << " x " << k << " chunk " << chunk);
        const int64_t r = dequant_chunk_rows(rows, k, chunk);
        ASSERT_GE(r, 1);
        ASSERT_LE(r, rows);
        if (r < rows) EXPECT_EQ(r % 128, 0);
        // Within the budget up to the rounding to 128 rows (and the 128-row floor).
        EXPECT_LE(r * k * 2, std::max(chunk, int64_t{128} * k * 2) + 128 * k * 2);
        // Not needlessly small: one fewer chunk would not fit.
        const int64_t chunks = (rows + r - 1) / r;
        if (chunks > 1 && r > 128) EXPECT_GT(rows * k * 2, (chunks - 1) * chunk);
        const QuantPart part{WeightFormat::kQ4_K, nullptr, rows};
        EXPECT_EQ(dequant_gemm_scratch_bytes({&part, 1}, k, chunk), r * k * 2);
      }
    }
  }
}

TEST(DequantGemmCuda, ChunksOfTwoPartsMatchTheReference) {
  if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(20261202);
  const int m = 300, k = 1024;
  const int rows0 = 640, rows1 = 200, n = rows0 + rows1;
  QuantWeight w0 = make_weight(WeightFormat::kQ4_K, rows0, k, rng);
  QuantWeight w1 = make_weight(WeightFormat::kQ6_K, rows1, k, rng);
  const kernels::testing::Bf16Data x = kernels::testing::random_bf16(size_t{m} * k, 1.f, rng);
  // Reference in double on bf16(ggml value), and S per output.
  std::vector<double> ref(size_t{m} * n), mag(size_t{m} * n);
  for (int t = 0; t < m; ++t) {
    for (int j = 0; j < n; ++j) {
      const float* wr = j < rows0 ? &w0.values[size_t(j) * k] : &w1.values[size_t(j - rows0) * k];
      double s = 0, a = 0;
      for (int i = 0; i < k; ++i) {
        const double p = double(round_to_bf16(wr[i])) * bf16_bits_to_fp32(x.bits[size_t(t) * k + i]);
        s += p;
        a += std::fabs(p);
      }
      ref[size_t(t) * n + j] = s;
      mag[size_t(t) * n + j] = a;
    }
  }
  auto gemm = Gemm::create();
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  const QuantPart parts[2] = {{WeightFormat::kQ4_K, w0.device.get(), rows0},
                              {WeightFormat::kQ6_K, w1.device.get(), rows1}};
  const int64_t chunk = 128 * k * 2;  // 640 rows: 5 chunks; 200 rows: 2 (128 + 72)
  const int64_t scratch_bytes = dequant_gemm_scratch_bytes(parts, k, chunk);
  ASSERT_EQ(scratch_bytes, 128 * k * 2);
  DeviceBuffer scratch(static_cast<size_t>(scratch_bytes));
  DeviceBuffer d_x = DeviceBuffer::from(x.bits);
  std::normal_distribution<float> dist(0.f, 2.f);
  for (GemmOut out : {GemmOut::kBf16, GemmOut::kFp32, GemmOut::kFp32Accumulate}) {
    SCOPED_TRACE(::testing::Message() << "out " << static_cast<int>(out));
    std::vector<float> start(size_t{m} * n);
    for (float& v : start) v = dist(rng);
    DeviceBuffer d_y = out == GemmOut::kBf16 ? DeviceBuffer(size_t{m} * n * 2)
                                             : DeviceBuffer::from(start);
    if (out != GemmOut::kFp32Accumulate) d_y.poison();
    ASSERT_TRUE(dequant_gemm(**gemm, parts, d_x.get(), d_y.get(), m, k, out, scratch.get(),
                             scratch_bytes, chunk, nullptr)
                    .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got(size_t{m} * n);
    if (out == GemmOut::kBf16) {
      std::vector<uint16_t> bits(size_t{m} * n);
      ASSERT_EQ(cudaMemcpy(bits.data(), d_y.get(), bits.size() * 2, cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (size_t i = 0; i < bits.size(); ++i) got[i] = bf16_bits_to_fp32(bits[i]);
    } else {
      ASSERT_EQ(cudaMemcpy(got.data(), d_y.get(), got.size() * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double want = ref[i] + (out == GemmOut::kFp32Accumulate ? start[i] : 0.0);
      const double tol = std::ldexp(mag[i], -12) +
                         (out == GemmOut::kBf16 ? std::ldexp(std::fabs(want), -7) : 0.0) +
                         (out == GemmOut::kFp32Accumulate ? std::ldexp(std::fabs(start[i]), -23) : 0.0);
      if (!(std::fabs(got[i] - want) <= tol) && bad++ < 5) {
        ADD_FAILURE() << "token " << i / n << " column " << i % n << ": " << got[i] << " vs "
                      << want << " (tol " << tol << ")";
      }
    }
    EXPECT_EQ(bad, 0);
  }
  // A scratch one byte short is an error, not an overrun.
  EXPECT_EQ(dequant_gemm(**gemm, parts, d_x.get(), scratch.get(), m, k, GemmOut::kBf16,
                         scratch.get(), scratch_bytes - 1, chunk, nullptr)
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashserve::model::cuda
