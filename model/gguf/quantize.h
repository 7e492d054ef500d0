#pragma once
// Encoding fp32 values into the GGUF tensor types we load (the inverse of dequant.h).
// The 32-element types use ggml's reference rounding (ggml-quants.c quantize_row_*_ref), so
// that files we write round-trip through any GGUF reader exactly as llama.cpp's own would:
//   F32 | F16 (round to nearest even) | BF16 (round to nearest even) |
//   Q8_0: d = amax / 127, q = round(x / d)                        (34-byte blocks of 32)
//   Q4_0: d = max / -8 (max: the value of largest magnitude),
//         q = min(15, trunc(x / d + 8.5))                          (18-byte blocks of 32)
//   Q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - m) / d + 0.5))
//                                                                  (20-byte blocks of 32)
//   Q5_0, Q5_1: as Q4_0 / Q4_1 with 32 levels (d = max / -16, (max - min) / 31)
// The K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and the IQ4 types (IQ4_NL, IQ4_XS) use our
// own importance-free search (quantize_kquants.cc): a valid encoding that any decoder
// reads identically, not byte-equal to llama.cpp's quantizer.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/gguf/ggml_type.h"

namespace flashserve::model {

// fp32 -> IEEE binary16, round to nearest even (overflow -> inf, NaN stays NaN).
uint16_t fp32_to_fp16(float f);
// fp32 -> bfloat16: flashserve::fp32_to_bf16_bits (base/bf16.h).

// True for the types quantize_row can encode: every type ggml_type_can_dequantize accepts
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K ... Q6_K, IQ4_XS).
bool ggml_type_can_quantize(GgmlType type);
// Their names, comma-separated, for error messages.
std::string quantizable_type_names();

// Bytes that `num_elements` values of `type` take; InvalidArgument naming the type when
// num_elements is not a whole number of blocks, Unimplemented for types we cannot encode.
absl::StatusOr<uint64_t> quantized_size(GgmlType type, int64_t num_elements);

// Encodes `x` (a whole number of blocks of `type`) into `out`, which must hold exactly
// quantized_size(type, x.size()) bytes. Errors as quantized_size, and InvalidArgument when
// `out` has another size.
absl::Status quantize_row(GgmlType type, std::span<const float> x, std::span<uint8_t> out);

// Whole-block encoders returning the bytes (elements past the last whole block of 32 are
// ignored); convenient for building test tensors.
std::string quantize_q8_0(const std::vector<float>& x);
std::string quantize_q4_0(const std::vector<float>& x);
std::string quantize_q4_1(const std::vector<float>& x);

}  // namespace flashserve::model
