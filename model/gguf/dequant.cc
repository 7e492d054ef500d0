#include "model/gguf/dequant.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/parallel_ranges.h"
#include "model/gguf/quant_blocks.h"

namespace flashserve::model {
namespace {

using blocks::load_u16;
using blocks::load_u32;

}  // namespace

// IEEE 754 binary16 -> binary32, exact for every input (subnormals, inf, NaN payloads).
float fp16_to_fp32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1F;
  const uint32_t mantissa = bits & 0x3FF;
  uint32_t out;
  if (exponent == 0x1F) {  // inf / NaN: keep the payload
    out = sign | 0x7F800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal: rebias 15 -> 127
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // signed zero
    out = sign;
  } else {  // subnormal half = mantissa * 2^-24, a normal float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(out);
}

float bf16_to_fp32(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

void dequantize_f32(const uint8_t* src, int64_t num_elements, float* dst) {
  if (num_elements <= 0) return;  // memcpy with a null pointer is UB even for 0 bytes
  std::memcpy(dst, src, static_cast<size_t>(num_elements) * sizeof(float));
}

void dequantize_f16(const uint8_t* src, int64_t num_elements, float* dst) {
  for (int64_t i = 0; i < num_elements; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
}

void dequantize_bf16(const uint8_t* src, int64_t num_elements, float* dst) {
  for (int64_t i = 0; i < num_elements; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
}

void dequantize_q8_0(const uint8_t* src, int64_t num_elements, float* dst) {
  const int64_t num_blocks = num_elements / kQuantBlockSize;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = src + b * blocks::kQ8_0Bytes;
    const float d = fp16_to_fp32(load_u16(block));
    const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
    float* out = dst + b * kQuantBlockSize;
    for (int j = 0; j < kQuantBlockSize; ++j) out[j] = static_cast<float>(qs[j]) * d;
  }
}

void dequantize_q4_0(const uint8_t* src, int64_t num_elements, float* dst) {
  const int64_t num_blocks = num_elements / kQuantBlockSize;
  constexpr int kHalf = kQuantBlockSize / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = src + b * blocks::kQ4_0Bytes;
    const float d = fp16_to_fp32(load_u16(block));
    const uint8_t* qs = block + 2;
    float* out = dst + b * kQuantBlockSize;
    for (int j = 0; j < kHalf; ++j) {
      out[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
      out[j + kHalf] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const uint8_t* src, int64_t num_elements, float* dst) {
  const int64_t num_blocks = num_elements / kQuantBlockSize;
  constexpr int kHalf = kQuantBlockSize / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = src + b * blocks::kQ4_1Bytes;
    const float d = fp16_to_fp32(load_u16(block));
    const float m = fp16_to_fp32(load_u16(block + 2));
    const uint8_t* qs = block + 4;
    float* out = dst + b * kQuantBlockSize;
    for (int j = 0; j < kHalf; ++j) {
      out[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      out[j + kHalf] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const uint8_t* src, int64_t num_elements, float* dst) {
  const int64_t num_blocks = num_elements / kQuantBlockSize;
  constexpr int kHalf = kQuantBlockSize / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = src + b * blocks::kQ5_0Bytes;
    const float d = fp16_to_fp32(load_u16(block));
    const uint32_t qh = load_u32(block + 2);
    const uint8_t* qs = block + 6;
    float* out = dst + b * kQuantBlockSize;
    for (int j = 0; j < kHalf; ++j) {
      const int lo = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
      const int hi = (qs[j] >> 4) | (((qh >> (j + kHalf)) & 1) << 4);
      out[j] = static_cast<float>(lo - 16) * d;
      out[j + kHalf] = static_cast<float>(hi - 16) * d;
    }
  }
}

void dequantize_q5_1(const uint8_t* src, int64_t num_elements, float* dst) {
  const int64_t num_blocks = num_elements / kQuantBlockSize;
  constexpr int kHalf = kQuantBlockSize / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = src + b * blocks::kQ5_1Bytes;
    const float d = fp16_to_fp32(load_u16(block));
    const float m = fp16_to_fp32(load_u16(block + 2));
    const uint32_t qh = load_u32(block + 4);
    const uint8_t* qs = block + 8;
    float* out = dst + b * kQuantBlockSize;
    for (int j = 0; j < kHalf; ++j) {
      const int lo = (qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
      const int hi = (qs[j] >> 4) | (((qh >> (j + kHalf)) & 1) << 4);
      out[j] = static_cast<float>(lo) * d + m;
      out[j + kHalf] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequantize_iq4_nl(const uint8_t* src, int64_t num_elements, float* dst) {
  const int64_t num_blocks = num_elements / kQuantBlockSize;
  constexpr int kHalf = kQuantBlockSize / 2;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const uint8_t* block = src + b * blocks::kIQ4_NLBytes;
    const float d = fp16_to_fp32(load_u16(block));
    const uint8_t* qs = block + 2;
    float* out = dst + b * kQuantBlockSize;
    for (int j = 0; j < kHalf; ++j) {
      out[j] = d * static_cast<float>(blocks::kIq4Values[qs[j] & 0x0F]);
      out[j + kHalf] = d * static_cast<float>(blocks::kIq4Values[qs[j] >> 4]);
    }
  }
}

absl::Status dequantize_row(GgmlType type, const uint8_t* src, int64_t num_elements,
                            float* dst) {
  if (!ggml_type_can_dequantize(type)) {
    return absl::UnimplementedError(
        absl::StrCat("dequantize: tensor type ", ggml_type_name(type), " is not supported"));
  }
  const int64_t block_size = ggml_type_traits(type).block_size;
  if (num_elements < 0 || num_elements % block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize: ", num_elements, " elements of type ",
                                                   ggml_type_name(type), " is not a whole number of ",
                                                   block_size, "-element blocks"));
  }
  // Whole blocks are independent: large tensors are spread over the cores (an 8B model's
  // matrices took ~20 s of one core at load); small ones stay on this thread.
  const int64_t block_bytes = ggml_type_traits(type).block_bytes;
  parallel_ranges(num_elements / block_size, int64_t{1} << 14, [&](int64_t begin, int64_t end) {
    const uint8_t* in = src + begin * block_bytes;
    const int64_t n = (end - begin) * block_size;
    float* out = dst + begin * block_size;
    switch (type) {
      case GgmlType::kF32: dequantize_f32(in, n, out); break;
      case GgmlType::kF16: dequantize_f16(in, n, out); break;
      case GgmlType::kBF16: dequantize_bf16(in, n, out); break;
      case GgmlType::kQ8_0: dequantize_q8_0(in, n, out); break;
      case GgmlType::kQ4_0: dequantize_q4_0(in, n, out); break;
      case GgmlType::kQ4_1: dequantize_q4_1(in, n, out); break;
      case GgmlType::kQ5_0: dequantize_q5_0(in, n, out); break;
      case GgmlType::kQ5_1: dequantize_q5_1(in, n, out); break;
      case GgmlType::kIQ4_NL: dequantize_iq4_nl(in, n, out); break;
      case GgmlType::kQ2_K: dequantize_q2_k(in, n, out); break;
      case GgmlType::kQ3_K: dequantize_q3_k(in, n, out); break;
      case GgmlType::kQ4_K: dequantize_q4_k(in, n, out); break;
      case GgmlType::kQ5_K: dequantize_q5_k(in, n, out); break;
      case GgmlType::kQ6_K: dequantize_q6_k(in, n, out); break;
      case GgmlType::kIQ4_XS: dequantize_iq4_xs(in, n, out); break;
      default: break;  // unreachable: filtered by ggml_type_can_dequantize
    }
  });
  return absl::OkStatus();
}

}  // namespace flashserve::model
