// The rule that sends a native matrix's GEMM to the quantized kernel or to deq+blas
// (model/cuda/native_gemm_path.h): its boundaries, on the shapes it was measured on.
#include "model/cuda/native_gemm_path.h"

#include <utility>

#include <gtest/gtest.h>

namespace flashserve::model::cuda {
namespace {

constexpr int kCrossover = 512;  // kernels::quant_gemm_max_tokens() on the H200

// The rule in a step with prefills and in one of decodes only, for a matrix on which the two
// agree (every one but the tiny ones: TinyMatrices* below).
bool deq_blas(int m, int64_t n, int64_t k, int max_tokens = kCrossover) {
  const bool mixed = native_gemm_by_deq_blas(m, n, k, max_tokens, /*decodes_only=*/false);
  EXPECT_EQ(mixed, native_gemm_by_deq_blas(m, n, k, max_tokens, /*decodes_only=*/true))
      << m << " x " << n << " x " << k;
  return mixed;
}

TEST(NativeGemmPath, PastTheCrossoverEveryMatrixTakesDeqBlas) {
  EXPECT_TRUE(deq_blas(513, 28672, 4096));  // 8B gate_up
  EXPECT_TRUE(deq_blas(513, 2048, 8192));   // 1B down
  EXPECT_TRUE(deq_blas(2048, 6144, 4096));  // 8B qkv (two-part too)
  EXPECT_FALSE(deq_blas(512, 28672, 4096));
}

TEST(NativeGemmPath, UpTo128TokensEveryMatrixButTheTinyStaysQuantized) {
  for (int m : {9, 64, 128}) {
    EXPECT_FALSE(deq_blas(m, 3072, 2048)) << m;  // 1B qkv
    EXPECT_FALSE(deq_blas(m, 6144, 4096)) << m;  // 8B [q; k] + v
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 960, 576, kCrossover, false)) << m;  // SmolLM2 qkv
  }
}

TEST(NativeGemmPath, TinyMatricesStayQuantizedUpToTheCrossoverInStepsWithPrefills) {
  for (int m : {65, 129, 256, 512}) {
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 960, 576, kCrossover, false)) << m;   // SmolLM2 qkv
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 3072, 576, kCrossover, false)) << m;  // gate_up
    EXPECT_FALSE(native_gemm_by_deq_blas(m, 4096, 512, kCrossover, false)) << m;  // 2 Mi exactly
  }
  for (int m : {129, 256, 512}) EXPECT_TRUE(deq_blas(m, 4097, 512)) << m;  // one row more
  EXPECT_TRUE(deq_blas(513, 960, 576));
}

TEST(NativeGemmPath, TinyMatricesTakeDeqBlasFrom65TokensInStepsOfDecodesOnly) {
  for (int m : {9, 64}) EXPECT_FALSE(native_gemm_by_deq_blas(m, 960, 576, kCrossover, true)) << m;
  for (int m : {65, 128, 256, 512}) {
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 960, 576, kCrossover, true)) << m;   // SmolLM2 qkv
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 576, 1536, kCrossover, true)) << m;  // SmolLM2 down
    EXPECT_TRUE(native_gemm_by_deq_blas(m, 4096, 512, kCrossover, true)) << m;  // 2 Mi exactly
  }
  // The next tier keeps its own rule: quantized up to 128 tokens.
  EXPECT_FALSE(deq_blas(128, 4097, 512));
}

TEST(NativeGemmPath, SmallMatricesAreDequantizedAsAGroup) {
  EXPECT_TRUE(native_gemm_dequant_grouped(960, 576));     // SmolLM2 qkv
  EXPECT_TRUE(native_gemm_dequant_grouped(3072, 2048));   // 1B qkv
  EXPECT_TRUE(native_gemm_dequant_grouped(4096, 2048));   // 8 Mi exactly
  EXPECT_FALSE(native_gemm_dequant_grouped(4097, 2048));  // one row more
  EXPECT_FALSE(native_gemm_dequant_grouped(16384, 2048)); // 1B gate_up: dequantized alone
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
    EXPECT_TRUE(deq_blas(m, 3072, 2048)) << m;   // 1B qkv
    EXPECT_TRUE(deq_blas(m, 2048, 2048)) << m;   // 1B o
    EXPECT_TRUE(deq_blas(m, 4096, 2048)) << m;   // 8 Mi exactly
    EXPECT_FALSE(deq_blas(m, 4097, 2048)) << m;  // one row more
    EXPECT_FALSE(deq_blas(m, 6144, 4096)) << m;  // 8B qkv, two-part
    EXPECT_FALSE(deq_blas(m, 4096, 4096)) << m;  // 8B o
    EXPECT_FALSE(deq_blas(m, 2048, 8192)) << m;  // 1B down
    EXPECT_FALSE(deq_blas(m, 16384, 2048)) << m; // 1B gate_up
  }
}

TEST(NativeGemmPath, ALowerCrossoverWins) {
  // A device whose quantized GEMM loses from 129 tokens: everything past it dequantizes.
  EXPECT_TRUE(deq_blas(129, 28672, 4096, 128));
  EXPECT_FALSE(deq_blas(128, 28672, 4096, 128));
}

TEST(NativeGemmPath, SplitSumsAreFoldedUpTo64Tokens) {
  // 1B down (2048 x 8192) and 8B o (4096 x 4096)
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{2048, 8192}, {4096, 4096}}) {
    EXPECT_TRUE(native_gemm_folds_split_sum(9, n, k));
    EXPECT_TRUE(native_gemm_folds_split_sum(64, n, k));  // measured: the fold wins (1B and 8B)
    EXPECT_FALSE(native_gemm_folds_split_sum(65, n, k));
    EXPECT_FALSE(native_gemm_folds_split_sum(256, n, k));  // measured: the fold loses
  }
}

TEST(NativeGemmPath, TinyMatricesFoldAtEveryStepSize) {
  // SmolLM2-135M: o 576 x 576, down 576 x 1536, gate_up 3072 x 576
  for (const auto& [n, k] :
       {std::pair<int64_t, int64_t>{576, 576}, {576, 1536}, {3072, 576}}) {
    for (int m : {1, 64, 65, 256, 512}) EXPECT_TRUE(native_gemm_folds_split_sum(m, n, k)) << m;
  }
  EXPECT_FALSE(native_gemm_folds_split_sum(65, 2048, 1025));  // just past kTinyMatrixElements
}

}  // namespace
}  // namespace flashserve::model::cuda
