// The rule that sends a native matrix's GEMM to the quantized kernel or to deq+blas
// (model/cuda/native_gemm_path.h): its boundaries, on the shapes it was measured on.
#include "model/cuda/native_gemm_path.h"

#include <gtest/gtest.h>

namespace flashserve::model::cuda {
namespace {

constexpr int kCrossover = 256;  // kernels::quant_gemm_max_tokens() on the H200

TEST(NativeGemmPath, PastTheCrossoverEveryMatrixTakesDeqBlas) {
  EXPECT_TRUE(native_gemm_by_deq_blas(257, 28672, 4096, false, kCrossover));  // 8B gate_up
  EXPECT_TRUE(native_gemm_by_deq_blas(257, 2048, 8192, false, kCrossover));   // 1B down
  EXPECT_FALSE(native_gemm_by_deq_blas(256, 28672, 4096, false, kCrossover));
}

TEST(NativeGemmPath, UpTo128TokensEveryMatrixStaysQuantized) {
  for (int m : {9, 64, 128}) {
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 3072, 2048, false, kCrossover)) << m;  // 1B qkv
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 5120, 4096, true, kCrossover)) << m;   // 8B [q; k] + v
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 960, 576, false, kCrossover)) << m;    // SmolLM2 qkv
  }
}

TEST(NativeGemmPath, From129TokensTwoPartAndSmallMatricesTakeDeqBlas) {
  for (int m : {129, 192, 256}) {
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 5120, 4096, true, kCrossover)) << m;   // two-part
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 3072, 2048, false, kCrossover)) << m;  // 1B qkv
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 2048, 2048, false, kCrossover)) << m;  // 1B o
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 4096, 2048, false, kCrossover)) << m;  // 8 Mi exactly
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 4097, 2048, false, kCrossover)) << m; // one row more
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 4096, 4096, false, kCrossover)) << m; // 8B o
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 2048, 8192, false, kCrossover)) << m; // 1B down
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 16384, 2048, false, kCrossover)) << m;// 1B gate_up
  }
}

TEST(NativeGemmPath, ALowerCrossoverWins) {
  // A device whose quantized GEMM loses from 129 tokens: everything past it dequantizes.
  EXPECT_TRUE(native_gemm_by_deq_blas(129, 28672, 4096, false, 128));
  EXPECT_FALSE(native_gemm_by_deq_blas(128, 28672, 4096, false, 128));
}

}  // namespace
}  // namespace flashserve::model::cuda
