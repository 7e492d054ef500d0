#pragma once
// Tensor-core GEMM on quantized weights kept in their block format (kernels/quant/
// quant_layout.h): the linear layers of steps with more tokens than the GEMV takes
// (m > kGemvMaxRows: prefill, large decode batches).
//
//   y[m, n] (+)= x[m, k] . bf16(w^)[n, k]^T
//
// w^ is kernels/cpu/quant.h's dequantize_gemm_cpu: with ggml's value of a weight written
// a q (+ c) (a, c the block's fp32 scale factors, q the quant less its offset),
// bf16_rn(q bf16(a) (+ bf16(c))) with one rounding (Q8_0: ggml's value rounded to bf16) —
// dequantize_bf16()'s value up to the rounding of a and c to bf16, < 2^-9 relative each.
// The dequantization happens in registers, fragment by fragment: every weight byte is read
// from HBM once per CTA column (the Q4 file's 0.56 bytes an element, against 2 for a bf16
// weight, plus 2 + 2 for dequantizing into a workspace first). mma.sync m16n8k16 (sm_80+)
// with fp32 accumulation (kernels/quant/quant_gemm.cu), on Hopper wgmma with the decoded
// weights as the register A operand (kernels/quant/quant_gemm_sm90.cu); for small matrices at
// small m, mma.sync on narrow tiles whose weights are decoded into shared memory
// (kernels/quant/quant_gemm_narrow.cu).
//
// Callers pass activations rounded as the quantized GEMV rounds them
// (round_activations_q8, kernels/quant/quant_gemv.h) so that a token's numerics do not
// depend on whether its step had more than kGemvMaxRows tokens (up to summation order and
// the bf16 roundings of the weights).
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/gemv.h"
#include "kernels/quant/quant_layout.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashserve::kernels {

// Which kernel computes it. kAuto: the faster one for the device, m and the matrix
// (measured, bench/gemm/NOTES.md); the others force one (tests, benchmarks). kMmaSync:
// mma.sync (kernels/quant/quant_gemm.cu), any sm_80+ GPU. kWgmmaWs (kAuto's choice on Hopper
// past the narrow kernel's shapes): wgmma with the decoded weights as the register A operand,
// warp-specialized (a producer warpgroup filling an mbarrier ring by TMA, x and the weight
// rows, and the decoded scales; two consumer warpgroups; kernels/quant/quant_gemm_sm90.cu),
// Hopper only (quant_gemm_wgmma_supported()), else InvalidArgument. kNarrow (kAuto's choice for a matrix
// of at most kQuantGemmNarrowMaxElements weights in rows of at most kQuantGemmNarrowMaxK, at up
// to kQuantGemmNarrowMaxTokens tokens):
// mma.sync on tiles of 16-32 rows by 16-64 tokens over the whole k, the CTA's rows decoded
// into shared memory before the PDL wait (kernels/quant/quant_gemm_narrow.cu), any sm_80+ GPU;
// k is never split; InvalidArgument where the decoded rows of k elements do not fit its
// shared memory (quant_gemm_narrow_supported()).
enum class QuantGemmKernel { kAuto, kMmaSync, kWgmmaWs, kNarrow };

// Where kAuto takes kNarrow: up to 64 tokens, 2 Mi weights and rows of 1,536 (measured on the
// H200, bench/gemm/NOTES.md twenty-fourth session: at 16-64 tokens it beats the wgmma kernel on
// every SmolLM2 matrix, k 576 and 1,536, by 1.2-2.4x; on a 512 x 2,048 matrix, the 1B's v, it
// loses by 2-6 %; past 64 tokens the model dequantizes such matrices anyway).
inline constexpr int kQuantGemmNarrowMaxTokens = 64;
inline constexpr int64_t kQuantGemmNarrowMaxElements = int64_t{2} << 20;
inline constexpr int kQuantGemmNarrowMaxK = 1536;

struct QuantGemmParams {
  WeightFormat format = WeightFormat::kQ4_K;
  const void* w = nullptr;  // quant_layout(format, n, k), 16-byte aligned
  const void* x = nullptr;  // bf16 [m, k], 16-byte aligned
  // kBf16: y = x w^T as bf16; kFp32: as fp32; kFp32Accumulate: y += x w^T in fp32.
  GemvOutput output = GemvOutput::kBf16;
  void* y = nullptr;  // [m][ldy], columns [0, n) written
  int64_t ldy = 0;    // elements between rows of y, >= n
  int m = 0, n = 0, k = 0;
  // Scratch for the partial sums of a split k (small grids; see quant_gemm.cu), fp32,
  // quant_gemm_partials_floats(num_sms) of them; with fewer (or none) k is split less (or
  // not at all), which is slower, never wrong.
  float* partials = nullptr;
  int64_t partials_floats = 0;
  QuantGemmKernel kernel = QuantGemmKernel::kAuto;
  // The token tile: kWgmmaWs 64, 128 or 256 tokens a CTA, kNarrow 16, 32 or 64; 0 (the
  // default): the launcher's choice for the shape. Anything else, or a nonzero tile with the
  // mma.sync kernel, is InvalidArgument. Tests and benchmarks force it.
  int token_tile = 0;
  // kNarrow's row tile, 16 or 32 weight rows a CTA; 0: the launcher's choice. Nonzero with
  // another kernel, or anything else, is InvalidArgument.
  int row_tile = 0;
  // Where k is split, leave the sum of the splits to the caller: y is not touched, the
  // partial sums stay in p.partials as [splits][m][n] fp32 (split s of output (t, f) at
  // partials[(s * m + t) * n + f]) and quant_gemm's *splits_out says how many. The caller
  // then runs quant_gemm_reduce(), or folds the sum into the kernel that reads y next
  // (kernels/layers.h: RmsNormParams::partials, SwigluParams::partials), which adds the
  // splits in the same order and so gives the same bits, one launch and one pass over y
  // fewer. With one split y is written as usual.
  bool defer_reduction = false;
};

// Whether QuantGemmKernel::kWgmmaWs runs on the current device (compute capability 9.0).
bool quant_gemm_wgmma_supported();

// The largest step, in tokens, for which quant_gemm() (kAuto) beats dequantizing the matrix
// into a bf16 workspace for cuBLASLt on the current device (measured: bench/gemm/NOTES.md);
// callers dequantize past it. Depends on the device alone, so a step of m tokens always
// runs the same kernels.
int quant_gemm_max_tokens();

// The scratch quant_gemm() may use on a device of num_sms SMs, whatever the shape (~17 MB
// on 132 SMs).
int64_t quant_gemm_partials_floats(int num_sms);

// Whether quant_gemm() takes weights of format f with rows of k elements (any m, n >= 1).
bool quant_gemm_supported(WeightFormat f, int k);

// Whether QuantGemmKernel::kNarrow's tile of row_tile rows by token_tile tokens (its smallest
// by default) takes rows of k elements: their decoded rows fit its shared memory (the
// smallest tile: k up to ~3,000).
bool quant_gemm_narrow_supported(int k, int row_tile = 16, int token_tile = 16);

// Asynchronous on `stream`, capturable (no allocation, no synchronisation); launched as a
// dependent kernel (kernels/dependent_launch.cuh). InvalidArgument naming the value for an
// unsupported format, shape, output or pointer. *splits_out (when not null) gets the number
// of k splits the call made, 1 when k was not split: a pure function of the shape, p.kernel,
// p.partials_floats and num_sms, so a captured graph always makes the same number.
absl::Status quant_gemm(const QuantGemmParams& p, int num_sms, cudaStream_t stream,
                        int* splits_out = nullptr);

// y from the `splits` partial sums a quant_gemm(p with defer_reduction) left in p.partials,
// added in split order, with p.output's rule: the kernel quant_gemm launches itself when it
// does not defer (bit for bit). Nothing for splits <= 1.
absl::Status quant_gemm_reduce(const QuantGemmParams& p, int splits, cudaStream_t stream);

}  // namespace flashserve::kernels
