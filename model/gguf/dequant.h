#pragma once
// Decoders of ggml's tensor encodings to fp32, exactly as ggml defines them
// (ggml/src/ggml-quants.c, dequantize_row_*; byte layouts in quant_blocks.h). Every product
// is evaluated in fp32 in ggml's order (e.g. Q4_K: (d * sc) * q - (dmin * m)), without FMA
// contraction (the library is built with -ffp-contract=off), so results are bit-exact.
// Blocks of 32 elements:
//   Q4_0 (18 B): fp16 d | 16 B qs;  x[j] = ((qs[j] & 0xF) - 8) * d, x[j + 16] from qs[j] >> 4
//   Q4_1 (20 B): fp16 d | fp16 m | 16 B qs; x[j] = (qs[j] & 0xF) * d + m, ...
//   Q5_0 (22 B): fp16 d | u32 qh | 16 B qs; q = nibble | (bit j of qh) << 4, x = (q - 16) * d
//   Q5_1 (24 B): fp16 d | fp16 m | u32 qh | 16 B qs; x = q * d + m
//   Q8_0 (34 B): fp16 d | 32 x int8 qs;  x[j] = qs[j] * d
//   IQ4_NL (18 B): fp16 d | 16 B qs;  x = d * kIq4Values[nibble] (a fixed non-linear grid)
// Super-blocks of 256 elements (K-quants, IQ4_XS), with sub-block scales:
//   Q2_K (84 B):  16 x (4-bit scale, 4-bit min) | 2-bit q | fp16 d, dmin;
//                 x = (d * sc) * q - (dmin * m), sub-blocks of 16
//   Q3_K (110 B): high-bit mask | 2-bit low q | 16 x 6-bit signed scales | fp16 d;
//                 x = (d * (sc - 32)) * (q - 4), q 3 bits, sub-blocks of 16
//   Q4_K (144 B): fp16 d, dmin | 8 x (6-bit scale, 6-bit min) | 4-bit q;
//                 x = (d * sc) * q - (dmin * m), sub-blocks of 32
//   Q5_K (176 B): as Q4_K plus a fifth bit per element
//   Q6_K (210 B): 4-bit low q | 2-bit high q | 16 x int8 scales | fp16 d;
//                 x = (d * sc) * (q - 32), sub-blocks of 16
//   IQ4_XS (136 B): fp16 d | 8 x 6-bit signed scales | 4-bit grid indices;
//                 x = (d * (sc - 32)) * kIq4Values[index], sub-blocks of 32
// Plain types: F32, F16 (IEEE half), BF16 (upper half of an fp32).
//
// Contract of every decoder: `src` holds the encoding of `num_elements` consecutive
// elements (for block types num_elements must be a whole number of blocks, and src holds
// num_elements / block_size blocks); `dst` has room for num_elements floats. Callers may
// decode a single row at a time: rows of a ggml tensor always start on a block boundary.
#include <cstdint>

#include "absl/status/status.h"
#include "model/gguf/ggml_type.h"

namespace flashserve::model {

// Elements per block of Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / IQ4_NL. The K-quants and IQ4_XS
// use super-blocks of kKQuantBlockSize; ggml_type_traits(type).block_size is the general way.
inline constexpr int64_t kQuantBlockSize = 32;
inline constexpr int64_t kKQuantBlockSize = 256;

float fp16_to_fp32(uint16_t bits);
float bf16_to_fp32(uint16_t bits);

void dequantize_f32(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_f16(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_bf16(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q8_0(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q4_0(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q4_1(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q5_0(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q5_1(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_iq4_nl(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q2_k(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q3_k(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q4_k(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q5_k(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q6_k(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_iq4_xs(const uint8_t* src, int64_t num_elements, float* dst);

// Dispatches on `type`, over the host's cores when the tensor is large (base/parallel_ranges.h).
// Unimplemented naming the type if unsupported; InvalidArgument if num_elements is negative
// or not a whole number of blocks.
absl::Status dequantize_row(GgmlType type, const uint8_t* src, int64_t num_elements,
                            float* dst);

}  // namespace flashserve::model
