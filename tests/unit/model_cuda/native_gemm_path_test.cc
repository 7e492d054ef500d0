// The rule that sends a native matrix's GEMM to the quantized kernel or to deq+blas
// (model/cuda/native_gemm_path.h): its boundaries, on the shapes it was measured on.
#include "model/cuda/native_gemm_path.h"

#include <gtest/gtest.h>

namespace flashserve::model::cuda {
namespace {

constexpr int kCrossover = 512;  // kernels::quant_gemm_max_tokens() on the H200

TEST(NativeGemmPath, PastTheCrossoverEveryMatrixTakesDeqBlas) {
  EXPECT_TRUE(native_gemm_by_deq_blas(513, 28672, 4096, kCrossover));  // 8B gate_up
  EXPECT_TRUE(native_gemm_by_deq_blas(513, 2048, 8192, kCrossover));   // 1B down
  EXPECT_TRUE(native_gemm_by_deq_blas(2048, 6144, 4096, kCrossover));  // 8B qkv (two-part too)
  EXPECT_FALSE(native_gemm_by_deq_blas(512, 28672, 4096, kCrossover));
}

TEST(NativeGemmPath, UpTo128TokensEveryMatrixStaysQuantized) {
  for (int m : {9, 64, 128}) {
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 3072, 2048, kCrossover)) << m;  // 1B qkv
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 6144, 4096, kCrossover)) << m;  // 8B [q; k] + v
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 960, 576, kCrossover)) << m;    // SmolLM2 qkv
  }
}

TEST(NativeGemmPath, TinyMatricesStayQuantizedUpToTheCrossover) {
  for (int m : {129, 256, 512}) {
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 960, 576, kCrossover)) << m;   // SmolLM2 qkv
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 3072, 576, kCrossover)) << m;  // SmolLM2 gate_up
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 4096, 512, kCrossover)) << m;  // 2 Mi exactly
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 4097, 512, kCrossover)) << m;   // one row more
  }
  EXPECT_TRUE(native_gemm_by_deq_blas(513, 960, 576, kCrossover));
}

TEST(NativeGemmPath, TinyMatricesTake64TokenTilesUpTo256Tokens) {
  for (int m : {9, 64}) EXPECT_EQ(native_gemm_token_tile(m, 960, 576), 0) << m;
  for (int m : {65, 128, 200, 256}) EXPECT_EQ(native_gemm_token_tile(m, 960, 576), 64) << m;
  for (int m : {257, 512}) EXPECT_EQ(native_gemm_token_tile(m, 576, 1536), 128) << m;
  for (int m : {65, 256, 512}) {  // the launcher's choice on anything larger
    EXPECT_EQ(native_gemm_token_tile(m, 4097, 512), 0) << m;
    EXPECT_EQ(native_gemm_token_tile(m, 2048, 2048), 0) << m;  // 1B o
  }
}

TEST(NativeGemmPath, From129TokensSmallMatricesTakeDeqBlas) {
  for (int m : {129, 192, 256, 512}) {
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 3072, 2048, kCrossover)) << m;   // 1B qkv
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 2048, 2048, kCrossover)) << m;   // 1B o
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 4096, 2048, kCrossover)) << m;   // 8 Mi exactly
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 4097, 2048, kCrossover)) << m;  // one row more
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 6144, 4096, kCrossover)) << m;  // 8B qkv, two-part
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 4096, 4096, kCrossover)) << m;  // 8B o
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 2048, 8192, kCrossover)) << m;  // 1B down
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 16384, 2048, kCrossover)) << m; // 1B gate_up
  }
}

TEST(NativeGemmPath, ALowerCrossoverWins) {
  // A device whose quantized GEMM loses from 129 tokens: everything past it dequantizes.
  EXPECT_TRUE(native_gemm_by_deq_blas(129, 28672, 4096, 128));
  EXPECT_FALSE(native_gemm_by_deq_blas(128, 28672, 4096, 128));
}

TEST(NativeGemmPath, SplitSumsAreFoldedUpTo64Tokens) {
  EXPECT_TRUE(native_gemm_folds_split_sum(9));
  EXPECT_TRUE(native_gemm_folds_split_sum(64));  // measured: the fold wins (1B and 8B)
  EXPECT_FALSE(native_gemm_folds_split_sum(65));
  EXPECT_FALSE(native_gemm_folds_split_sum(256));  // measured: the fold loses
}

}  // namespace
}  // namespace flashserve::model::cuda
