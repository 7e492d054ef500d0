#pragma once
// Decoders of ggml's tensor encodings to fp32, exactly as ggml defines them
// (ggml/src/ggml-quants.c, dequantize_row_*). Block types hold 32 elements per block:
//   Q4_0 (18 bytes): fp16 d | 16 bytes qs;  x[j] = ((qs[j] & 0xF) - 8) * d,
//                    x[j + 16] = ((qs[j] >> 4) - 8) * d            for j in [0, 16)
//   Q4_1 (20 bytes): fp16 d | fp16 m | 16 bytes qs; x[j] = (qs[j] & 0xF) * d + m,
//                    x[j + 16] = (qs[j] >> 4) * d + m
//   Q8_0 (34 bytes): fp16 d | 32 x int8 qs;  x[j] = qs[j] * d
// Plain types: F32, F16 (IEEE half), BF16 (upper half of an fp32).
//
// Contract of every decoder: `src` holds the encoding of `num_elements` consecutive
// elements (for block types num_elements must be a multiple of 32, i.e. whole blocks, and
// src holds num_elements / 32 blocks); `dst` has room for num_elements floats. Callers may
// decode a single row at a time: rows of a ggml tensor always start on a block boundary.
#include <cstdint>

#include "absl/status/status.h"
#include "model/gguf/ggml_type.h"

namespace flashserve::model {

inline constexpr int64_t kQuantBlockSize = 32;  // elements per Q4_0 / Q4_1 / Q8_0 block

float fp16_to_fp32(uint16_t bits);
float bf16_to_fp32(uint16_t bits);

void dequantize_f32(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_f16(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_bf16(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q8_0(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q4_0(const uint8_t* src, int64_t num_elements, float* dst);
void dequantize_q4_1(const uint8_t* src, int64_t num_elements, float* dst);

// Dispatches on `type`. Unimplemented naming the type if unsupported; InvalidArgument if
// num_elements is negative or not a whole number of blocks.
absl::Status dequantize_row(GgmlType type, const uint8_t* src, int64_t num_elements,
                            float* dst);

}  // namespace flashserve::model
