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

namespace flashserve::model {
namespace {

constexpr int kBlock = 32;  // elements per block of Q8_0, Q4_0 and Q4_1

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

template <void (*kEncodeBlock)(const float*, uint8_t*), int kBlockBytes>
void encode_blocks(const float* x, int64_t n, uint8_t* out) {
  for (int64_t b = 0; b < n / kBlock; ++b) kEncodeBlock(x + b * kBlock, out + b * kBlockBytes);
}

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
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1: return true;
    default: return false;
  }
}

absl::StatusOr<uint64_t> quantized_size(GgmlType type, int64_t num_elements) {
  if (!ggml_type_can_quantize(type)) {
    return absl::UnimplementedError(absl::StrCat("quantize: cannot encode tensor type ", ggml_type_name(type),
                                                 " (supported: f32, f16, bf16, q8_0, q4_0, q4_1)"));
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
    default: return absl::InternalError("quantize: unreachable type");
  }
  return absl::OkStatus();
}

std::string quantize_q8_0(const std::vector<float>& x) { return encode_whole_blocks<encode_q8_0_block, 34>(x); }
std::string quantize_q4_0(const std::vector<float>& x) { return encode_whole_blocks<encode_q4_0_block, 18>(x); }
std::string quantize_q4_1(const std::vector<float>& x) { return encode_whole_blocks<encode_q4_1_block, 20>(x); }

}  // namespace flashserve::model
