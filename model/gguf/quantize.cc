// fp32 -> GGUF tensor types with ggml's reference rounding (see model/gguf/quantize.h).
#include "model/gguf/quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/bf16.h"
#include "base/status_macros.h"
#include "model/gguf/quant_blocks.h"
#include "model/gguf/quantize_internal.h"

namespace flashserve::model {
namespace {

namespace qi = quant_internal;

constexpr int kBlock = 32;  // elements per block of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL

void put_u16(uint8_t* out, uint16_t v) {
  out[0] = static_cast<uint8_t>(v & 0xFF);
  out[1] = static_cast<uint8_t>(v >> 8);
}

void encode_f32(const float* x, int64_t n, uint8_t* out) { std::memcpy(out, x, n * sizeof(float)); }

void encode_f16(const float* x, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) put_u16(out + 2 * i, fp32_to_fp16(x[i]));
}

void encode_bf16(const float* x, int64_t n, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i) put_u16(out + 2 * i, fp32_to_bf16_bits(x[i]));
}

// One 34-byte block: fp16 d | 32 x int8.
void encode_q8_0_block(const float* x, uint8_t* out) {
  float amax = 0;
  for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.f;
  const float id = d != 0 ? 1.f / d : 0.f;
  put_u16(out, fp32_to_fp16(d));
  for (int j = 0; j < kBlock; ++j) out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

// One 18-byte block: fp16 d | 16 bytes of nibbles (element j low, j + 16 high).
void encode_q4_0_block(const float* x, uint8_t* out) {
  float amax = 0, max = 0;  // max: the value of largest magnitude, with its sign
  for (int j = 0; j < kBlock; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.f;
  const float id = d != 0 ? 1.f / d : 0.f;
  put_u16(out, fp32_to_fp16(d));
  for (int j = 0; j < kBlock / 2; ++j) {
    const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
    const int hi = std::min(15, static_cast<int>(x[j + 16] * id + 8.5f));
    out[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

// One 20-byte block: fp16 d | fp16 m | 16 bytes of nibbles.
void encode_q4_1_block(const float* x, uint8_t* out) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kBlock; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / 15.f;
  const float id = d != 0 ? 1.f / d : 0.f;
  put_u16(out, fp32_to_fp16(d));
  put_u16(out + 2, fp32_to_fp16(lo));
  for (int j = 0; j < kBlock / 2; ++j) {
    const int q0 = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
    const int q1 = std::min(15, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
    out[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// One 22-byte block: fp16 d | u32 qh (fifth bits) | 16 bytes of nibbles; d = max / -16,
// q = min(31, trunc(x / d + 16.5)) (ggml's quantize_row_q5_0_ref).
void encode_q5_0_block(const float* x, uint8_t* out) {
  float amax = 0, max = 0;
  for (int j = 0; j < kBlock; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -16.f;
  const float id = d != 0 ? 1.f / d : 0.f;
  put_u16(out, fp32_to_fp16(d));
  uint32_t qh = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
    const int q1 = std::min(31, static_cast<int>(x[j + 16] * id + 16.5f));
    out[6 + j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>(q0 >> 4) << j;
    qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
  }
  blocks::store_u32(out + 2, qh);
}

// One 24-byte block: fp16 d | fp16 m | u32 qh | 16 bytes of nibbles; d = (max - min) / 31,
// m = min, q = min(31, trunc((x - m) / d + 0.5)) (ggml's quantize_row_q5_1_ref).
void encode_q5_1_block(const float* x, uint8_t* out) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < kBlock; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / 31.f;
  const float id = d != 0 ? 1.f / d : 0.f;
  put_u16(out, fp32_to_fp16(d));
  put_u16(out + 2, fp32_to_fp16(lo));
  uint32_t qh = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    const int q0 = std::min(31, static_cast<int>((x[j] - lo) * id + 0.5f));
    const int q1 = std::min(31, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
    out[8 + j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>(q0 >> 4) << j;
    qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
  }
  blocks::store_u32(out + 4, qh);
}

template <void (*kEncodeBlock)(const float*, uint8_t*), int kBlockBytes, int kElements = kBlock>
void encode_blocks(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / kElements; ++b) kEncodeBlock(x + b * kElements, out + b * kBlockBytes);
}

// The types quantize_row encodes, in the order error messages list them.
constexpr GgmlType kQuantizable[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
    GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL, GgmlType::kIQ4_XS,
};

template <void (*kEncodeBlock)(const float*, uint8_t*), int kBlockBytes>
std::string encode_whole_blocks(const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size()) / kBlock * kBlock;
  std::string out(n / kBlock * kBlockBytes, '\0');
  encode_blocks<kEncodeBlock, kBlockBytes>(x.data(), n, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

}  // namespace

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs > 0x7F800000) return sign | 0x7E00;   // NaN
  if (abs >= 0x477FF000) return sign | 0x7C00;  // rounds to >= 65520: inf
  if (abs < 0x38800000) {                       // below 2^-14: subnormal half
    const float magnitude = std::bit_cast<float>(abs);
    // Multiples of 2^-24; nearbyint rounds half to even in the default rounding mode.
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(magnitude, 24)));
  }
  const uint32_t rounded = abs + 0xFFF + ((abs >> 13) & 1);  // round mantissa to 10 bits
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

bool ggml_type_can_quantize(GgmlType type) {
  for (GgmlType t : kQuantizable) {
    if (t == type) return true;
  }
  return false;
}

std::string quantizable_type_names() {
  std::string names;
  for (GgmlType t : kQuantizable) absl::StrAppend(&names, names.empty() ? "" : ", ", ggml_type_name(t));
  return names;
}

absl::StatusOr<uint64_t> quantized_size(GgmlType type, int64_t num_elements) {
  if (!ggml_type_can_quantize(type)) {
    return absl::UnimplementedError(absl::StrCat("quantize: cannot encode tensor type ", ggml_type_name(type),
                                                 " (supported: ", quantizable_type_names(), ")"));
  }
  const GgmlTypeTraits traits = ggml_type_traits(type);
  if (num_elements < 0 || num_elements % traits.block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("quantize: ", num_elements, " values are not a whole number of ",
                                                   traits.name, " blocks of ", traits.block_size));
  }
  return static_cast<uint64_t>(num_elements / traits.block_size * traits.block_bytes);
}

absl::Status quantize_row(GgmlType type, std::span<const float> x, std::span<uint8_t> out) {
  const int64_t n = static_cast<int64_t>(x.size());
  ASSIGN_OR_RETURN(const uint64_t size, quantized_size(type, n));
  if (size != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat("quantize: ", n, " values of ", ggml_type_name(type), " take ",
                                                   size, " bytes, the output holds ", out.size()));
  }
  switch (type) {
    case GgmlType::kF32: encode_f32(x.data(), n, out.data()); break;
    case GgmlType::kF16: encode_f16(x.data(), n, out.data()); break;
    case GgmlType::kBF16: encode_bf16(x.data(), n, out.data()); break;
    case GgmlType::kQ8_0: encode_blocks<encode_q8_0_block, 34>(x.data(), n, out.data()); break;
    case GgmlType::kQ4_0: encode_blocks<encode_q4_0_block, 18>(x.data(), n, out.data()); break;
    case GgmlType::kQ4_1: encode_blocks<encode_q4_1_block, 20>(x.data(), n, out.data()); break;
    case GgmlType::kQ5_0: encode_blocks<encode_q5_0_block, 22>(x.data(), n, out.data()); break;
    case GgmlType::kQ5_1: encode_blocks<encode_q5_1_block, 24>(x.data(), n, out.data()); break;
    case GgmlType::kIQ4_NL: encode_blocks<qi::encode_iq4_nl_block, 18>(x.data(), n, out.data()); break;
    case GgmlType::kQ2_K: encode_blocks<qi::encode_q2_k_block, 84, 256>(x.data(), n, out.data()); break;
    case GgmlType::kQ3_K: encode_blocks<qi::encode_q3_k_block, 110, 256>(x.data(), n, out.data()); break;
    case GgmlType::kQ4_K: encode_blocks<qi::encode_q4_k_block, 144, 256>(x.data(), n, out.data()); break;
    case GgmlType::kQ5_K: encode_blocks<qi::encode_q5_k_block, 176, 256>(x.data(), n, out.data()); break;
    case GgmlType::kQ6_K: encode_blocks<qi::encode_q6_k_block, 210, 256>(x.data(), n, out.data()); break;
    case GgmlType::kIQ4_XS: encode_blocks<qi::encode_iq4_xs_block, 136, 256>(x.data(), n, out.data()); break;
    default: return absl::InternalError("quantize: unreachable type");
  }
  return absl::OkStatus();
}

std::string quantize_q8_0(const std::vector<float>& x) { return encode_whole_blocks<encode_q8_0_block, 34>(x); }
std::string quantize_q4_0(const std::vector<float>& x) { return encode_whole_blocks<encode_q4_0_block, 18>(x); }
std::string quantize_q4_1(const std::vector<float>& x) { return encode_whole_blocks<encode_q4_1_block, 20>(x); }

}  // namespace flashserve::model
