#pragma once
// Quantized weights kept in their block format on the device (ggml's Q8_0, Q4_0, Q4_1,
// Q4_K, Q5_K, Q6_K, repacked once at load: kernels/quant/quant_layout.h).
//
// Decode (m in [1, kGemvMaxRows] tokens): kernels::gemv() (kernels/gemv.h) with
// GemvParams::w_format set to the weight's format: the same params, inputs (kBf16,
// kRmsNorm) and epilogues (kBf16, kFp32, kFp32Accumulate, kSwiglu, kRopeAppend) as the bf16
// path, whose device code it shares (kernels/gemv_epilogue.cuh). One kernel per (format,
// row bucket): each CTA stages its m input rows into shared memory quantized to int8 per
// unit of 32 (llama.cpp's q8_1: scale dx = amax / 127), then every warp streams a pair of
// weight rows with 16-byte loads, turns each unit's quants into int8 quads in registers and
// multiplies them with dp4a, one fp32 multiply-add per unit and row for the scales.
// Why int8 activations and dp4a rather than bf16 ones and fp32 FMAs: at 75 % of the H200's
// 4.8 TB/s a 4-bit GEMV consumes ~7e12 weights/s; one fp32 FMA per weight plus its
// dequantization (mask, convert, subtract: ~4 instructions a weight) would need ~3e13
// instructions/s, the whole issue rate of the GPU, where dp4a does four weights per
// instruction and the decoding ~1 instruction per four. The price is the activations'
// rounding to 8 bits (relative error ~2^-8 of the unit's largest |x|), which llama.cpp's
// MMVQ kernels pay too; the fp32 reference, kernels/cpu/quant.h, does the same rounding.
//
// Prefill and large batches: dequantize_bf16() writes rows of a weight as bf16 into a
// workspace for cuBLASLt (model/cuda/gemm.h).
//
// All pointers are device pointers; launchers are asynchronous on `stream`, capturable
// (no allocation, no synchronisation), and return InvalidArgument naming the value for an
// unsupported shape or format.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/gemv.h"
#include "kernels/quant/quant_layout.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashserve::kernels {

// Shared memory the staged rows may take: int8 values and 12 bytes of scale and sums per
// unit of 32 (m rounded up to a power of two): 1.375 * m_bucket * k bytes, within every
// sm_80+ device's per-block limit. m = 8 fits k up to 14,848 (Llama 3 8B's 14,336).
inline constexpr int kQuantGemvMaxSmemBytes = 160 * 1024;

// Whether gemv() takes a weight of quantized format f with this shape: m in
// [1, kGemvMaxRows], k a whole number of f's blocks, the staged rows within
// kQuantGemvMaxSmemBytes.
bool quant_gemv_supported(WeightFormat f, int m, int k);

// gemv() for a quantized p.w_format, after gemv() has checked the pointers and the
// epilogue; call gemv().
absl::Status quant_gemv(const GemvParams& p, int num_sms, cudaStream_t stream);

// out = rows [row_begin, row_end) of a [num_rows, k] weight in format `format`, as bf16:
// every element exactly ggml's fp32 value (kernels/cpu/quant.h's dequantize_ggml_cpu)
// rounded to nearest-even bf16.
// With row_ids set it is a gather (the embedding lookup of a quantized token_embd): output
// row i is weight row row_ids[i] for i in [0, row_end - row_begin) (row_begin is then 0
// and each id must lie in [0, num_rows); ids are read after the previous kernel, as they
// may be its output). out_fp32 writes the exact fp32 values instead of bf16. At most 2^30
// units of 32 elements are written per call (InvalidArgument past that). Near HBM bandwidth:
// loads in flight per warp, 512-byte stores through a shared-memory tile
// (kernels/quant/quant_dequantize.cu).
struct DequantizeParams {
  WeightFormat format = WeightFormat::kQ4_K;
  const void* w = nullptr;  // quant_layout(format, num_rows, k)
  int64_t num_rows = 0;
  int64_t k = 0;
  int64_t row_begin = 0, row_end = 0;  // 0 <= row_begin < row_end <= num_rows
  void* out = nullptr;                  // bf16 (fp32 if out_fp32) [row_end - row_begin, k]
  const int32_t* row_ids = nullptr;     // [row_end - row_begin] or null
  bool out_fp32 = false;
};
absl::Status dequantize_bf16(const DequantizeParams& p, cudaStream_t stream);

// dequantize_bf16() of up to kMaxDequantJobs bf16 row ranges (no gathers, no fp32) in one
// launch, each job's output exactly dequantize_bf16()'s: for a layer's small matrices,
// whose one-by-one dequantizes are each a launch of a few microseconds set by latency, not
// bytes (model/cuda/native_gemm_path.h). InvalidArgument naming the job for anything
// dequantize_bf16() refuses, a gather or fp32 output.
inline constexpr int kMaxDequantJobs = 8;
absl::Status dequantize_bf16_batch(const DequantizeParams* jobs, int count, cudaStream_t stream);

// x[num_rows, k] bf16, in place: every unit of 32 replaced by bf16(dx * q), its int8
// quantization exactly as the quantized GEMV stages its input rows (dx = amax / 127, q
// rounded to nearest even: kernels/cpu/quant.h quantize_q8_cpu). Applied to the input of a
// GEMM over dequantized native weights, so that a step of more than kGemvMaxRows tokens
// computes what the GEMV computes for each token alone (up to fp32 summation order and the
// bf16 rounding of dx * q): batching does not change a request's numerics beyond that.
// InvalidArgument unless k is a multiple of 32 and x 16-byte aligned.
absl::Status round_activations_q8(void* x, int64_t num_rows, int64_t k, cudaStream_t stream);

}  // namespace flashserve::kernels
