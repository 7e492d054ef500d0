// The rule that sends a native matrix's GEMM to the quantized kernel or to deq+blas
// (model/cuda/native_gemm_path.h): its boundaries, on the shapes it was measured on.
#include "model/cuda/native_gemm_path.h"

#include <gtest/gtest.h>

namespace flashserve::model::cuda {
namespace {

constexpr int kCrossover = 512;  // kernels::quant_gemm_max_tokens() on the H200

bool deq_blas(int m, int64_t n, int64_t k, int max_tokens = kCrossover) {
  return native_gemm_by_deq_blas(m, n, k, max_tokens);
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
  }
}

// Up to 64 tokens the narrow quantized kernel, in decode-only steps too (no per-step
// dequantize: bench/serving/NOTES.md step 24); from 65 deq+blas.
TEST(NativeGemmPath, TinyMatricesTakeDeqBlasFrom65Tokens) {
  for (int m : {9, 17, 64}) {
    EXPECT_FALSE(deq_blas(m, 960, 576)) << m;   // SmolLM2 qkv
    EXPECT_FALSE(deq_blas(m, 3072, 576)) << m;  // gate_up
    EXPECT_FALSE(deq_blas(m, 576, 1536)) << m;  // down
    EXPECT_FALSE(deq_blas(m, 4096, 512)) << m;  // 2 Mi
  }
  for (int m : {65, 128, 256, 512, 513}) {
    EXPECT_TRUE(deq_blas(m, 960, 576)) << m;   // qkv
    EXPECT_TRUE(deq_blas(m, 3072, 576)) << m;  // gate_up
    EXPECT_TRUE(deq_blas(m, 576, 1536)) << m;  // down
    EXPECT_TRUE(deq_blas(m, 4096, 512)) << m;  // 2 Mi
  }
  // One row more is a small matrix: quantized up to 128 tokens in either kind of step.
  EXPECT_FALSE(deq_blas(17, 4097, 512));
  EXPECT_FALSE(deq_blas(128, 4097, 512));
  EXPECT_TRUE(deq_blas(129, 4097, 512));
}

TEST(NativeGemmPath, SmallMatricesAreDequantizedAsAGroup) {
  EXPECT_TRUE(native_gemm_dequant_grouped(960, 576));     // SmolLM2 qkv
  EXPECT_TRUE(native_gemm_dequant_grouped(3072, 2048));   // 1B qkv
  EXPECT_TRUE(native_gemm_dequant_grouped(4096, 2048));   // 8 Mi exactly
  EXPECT_FALSE(native_gemm_dequant_grouped(4097, 2048));  // one row more
  EXPECT_FALSE(native_gemm_dequant_grouped(16384, 2048)); // 1B gate_up: dequantized alone
}

// In a decode-only step only a group of tiny matrices (latency) goes to the side stream; a
// group holding a small one (bandwidth: the 1B's qkv and o) is dequantized on the stream.
TEST(NativeGemmPath, OnlyTinyMatricesGroupsAreForked) {
  EXPECT_TRUE(native_gemm_group_forked(960, 576));     // SmolLM2 qkv
  EXPECT_TRUE(native_gemm_group_forked(3072, 576));    // SmolLM2 gate_up
  EXPECT_TRUE(native_gemm_group_forked(4096, 512));    // 2 Mi exactly
  EXPECT_FALSE(native_gemm_group_forked(4097, 512));   // one row more
  EXPECT_FALSE(native_gemm_group_forked(2560, 2048));  // 1B [q; k]
  EXPECT_FALSE(native_gemm_group_forked(2048, 2048));  // 1B o
  EXPECT_TRUE(native_gemm_group_forked(512, 2048));    // 1B wv (Q6_K): tiny, but its group
                                                       // holds [q; k]
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
  EXPECT_TRUE(native_gemm_folds_split_sum(9));
  EXPECT_TRUE(native_gemm_folds_split_sum(64));  // measured: the fold wins (1B and 8B)
  EXPECT_FALSE(native_gemm_folds_split_sum(65));
  EXPECT_FALSE(native_gemm_folds_split_sum(256));  // measured: the fold loses
}

}  // namespace
}  // namespace flashserve::model::cuda
