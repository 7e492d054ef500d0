#pragma once
// fp32 references of kernels/quant/quant_gemv.h (the quantized GEMV and the dequantization
// to bf16), written from ggml's definitions and independent of the device layout:
//   dequantize_ggml_cpu  ggml's dequantize_row_* for Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K:
//                        the same fp32 operations in the same order, so the GPU's
//                        dequantization (rounded to bf16) must match it bit for bit;
//   quantize_q8_cpu      the activation quantization of the quantized GEMV, per unit of 32:
//                        dx = amax / 127, id = 1 / dx (0 when amax is 0),
//                        xq = round-to-nearest-even(x * id), all in fp32;
//   quant_gemv_cpu       gemv_cpu (kernels/cpu/gemv.h) on the dequantized weights w^ and the
//                        dequantized activations x^ = dx * xq of the rows the GEMV stages
//                        (kRmsNorm: normalised and rounded to bf16 first): the GPU computes
//                        sum(w^ x^) exactly up to fp32 rounding;
//   dequantize_gemm_cpu  the weights as the tensor-core GEMM decodes them: with ggml's
//                        value written a q (+ c) (a, c the block's fp32 scale factors, q the
//                        quant less its offset), bf16_rn(q bf16(a) (+ bf16(c))), one
//                        rounding of the exact value (Q8_0: ggml's value rounded to bf16);
//   quant_gemm_cpu       the reference of kernels/quant/quant_gemm.h: gemv_cpu on those
//                        weights and the bf16 input rows as they are.
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/gemv.h"
#include "kernels/quant/quant_layout.h"

namespace flashserve::kernels {

// dst[num_elements] = the values encoded by `src` (num_elements / block elements ggml blocks).
// InvalidArgument when num_elements is not a whole number of blocks; Unimplemented for bf16.
absl::Status dequantize_ggml_cpu(WeightFormat f, const uint8_t* src, int64_t num_elements,
                                 float* dst);

// dst[num_elements] = the values the tensor-core GEMM multiplies for `src` (see the top of
// this file). Errors as dequantize_ggml_cpu.
absl::Status dequantize_gemm_cpu(WeightFormat f, const uint8_t* src, int64_t num_elements,
                                 float* dst);

// q[k], d[k / 32] for x[k]; k a multiple of 32.
void quantize_q8_cpu(const float* x, int64_t k, int8_t* q, float* d);

// gemv_cpu with the weights given as ggml blocks of format f (p.w is ignored) and the input
// rows quantized by quantize_q8_cpu. Errors as dequantize_ggml_cpu.
absl::Status quant_gemv_cpu(const GemvCpuParams& p, WeightFormat f, const uint8_t* w_ggml);

// gemv_cpu with the weights given as ggml blocks of format f (p.w is ignored), decoded by
// dequantize_gemm_cpu; kBf16 input without a row gather, output kBf16, kFp32 or kFp32Accumulate
// (InvalidArgument otherwise). Errors as dequantize_ggml_cpu.
absl::Status quant_gemm_cpu(const GemvCpuParams& p, WeightFormat f, const uint8_t* w_ggml);

}  // namespace flashserve::kernels
