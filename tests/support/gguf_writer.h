#pragma once
// A small GGUF (v2/v3) writer for tests: builds in-memory images of GGUF files with any
// metadata (every value type, nested arrays) and tensors of any ggml type, plus hooks that
// produce hostile files (wrong counts, raw value types, explicit tensor offsets).
//
// Typical use:
//   flashserve::testing::GgufWriter w;
//   w.add("general.architecture", gguf_string("llama"))
//    .add("llama.block_count", gguf_u32(2))
//    .add("tokenizer.ggml.tokens", gguf_string_array({"a", "b"}));
//   w.add_tensor_f32("token_embd.weight", {8, 4}, values);   // dims in ggml order
//   w.add_tensor_q4_1("blk.0.attn_q.weight", {64, 2}, values); // quantized like ggml does
//   std::string bytes = w.bytes();   // -> GgufFile::from_bytes(bytes) or w.write_file(path)
//
// Header-only; tests link flashserve_model (the GgufValue / GgmlType types come from it).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/gguf/ggml_type.h"
#include "model/gguf/gguf.h"

namespace flashserve::testing {

using model::GgmlType;
using model::GgufValue;
using model::GgufValueType;

// ---- value constructors -----------------------------------------------------------------
inline GgufValue gguf_uint(GgufValueType type, uint64_t v) {
  GgufValue out;
  out.type = type;
  out.uint_value = v;
  return out;
}
inline GgufValue gguf_int(GgufValueType type, int64_t v) {
  GgufValue out;
  out.type = type;
  out.int_value = v;
  return out;
}
inline GgufValue gguf_u8(uint8_t v) { return gguf_uint(GgufValueType::kUint8, v); }
inline GgufValue gguf_u16(uint16_t v) { return gguf_uint(GgufValueType::kUint16, v); }
inline GgufValue gguf_u32(uint32_t v) { return gguf_uint(GgufValueType::kUint32, v); }
inline GgufValue gguf_u64(uint64_t v) { return gguf_uint(GgufValueType::kUint64, v); }
inline GgufValue gguf_i8(int8_t v) { return gguf_int(GgufValueType::kInt8, v); }
inline GgufValue gguf_i16(int16_t v) { return gguf_int(GgufValueType::kInt16, v); }
inline GgufValue gguf_i32(int32_t v) { return gguf_int(GgufValueType::kInt32, v); }
inline GgufValue gguf_i64(int64_t v) { return gguf_int(GgufValueType::kInt64, v); }
inline GgufValue gguf_f32(float v) {
  GgufValue out;
  out.type = GgufValueType::kFloat32;
  out.float_value = v;
  return out;
}
inline GgufValue gguf_f64(double v) {
  GgufValue out;
  out.type = GgufValueType::kFloat64;
  out.float_value = v;
  return out;
}
inline GgufValue gguf_bool(bool v) {
  GgufValue out;
  out.type = GgufValueType::kBool;
  out.bool_value = v;
  return out;
}
inline GgufValue gguf_string(std::string v) {
  GgufValue out;
  out.type = GgufValueType::kString;
  out.string_value = std::move(v);
  return out;
}
// An array; every element must have type `element_type` (elements may be arrays).
inline GgufValue gguf_array(GgufValueType element_type, std::vector<GgufValue> elements) {
  GgufValue out;
  out.type = GgufValueType::kArray;
  out.element_type = element_type;
  out.elements = std::move(elements);
  return out;
}
inline GgufValue gguf_string_array(const std::vector<std::string>& v) {
  std::vector<GgufValue> elements;
  elements.reserve(v.size());
  for (const std::string& s : v) elements.push_back(gguf_string(s));
  return gguf_array(GgufValueType::kString, std::move(elements));
}
inline GgufValue gguf_i32_array(const std::vector<int32_t>& v) {
  std::vector<GgufValue> elements;
  for (int32_t x : v) elements.push_back(gguf_i32(x));
  return gguf_array(GgufValueType::kInt32, std::move(elements));
}
inline GgufValue gguf_f32_array(const std::vector<float>& v) {
  std::vector<GgufValue> elements;
  for (float x : v) elements.push_back(gguf_f32(x));
  return gguf_array(GgufValueType::kFloat32, std::move(elements));
}

// ---- fp16 and ggml reference quantizers (for building quantized test tensors) ----------
// fp32 -> IEEE binary16, round to nearest even (overflow -> inf, NaN stays NaN).
inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7FFFFFFF;
  if (abs > 0x7F800000) return sign | 0x7E00;             // NaN
  if (abs >= 0x477FF000) return sign | 0x7C00;            // rounds to >= 65520: inf
  if (abs < 0x38800000) {                                 // below 2^-14: subnormal half
    const float magnitude = std::bit_cast<float>(abs);
    // Multiples of 2^-24; nearbyint rounds half to even in the default rounding mode.
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(magnitude, 24)));
  }
  const uint32_t rounded = abs + 0xFFF + ((abs >> 13) & 1);  // round mantissa to 10 bits
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

inline uint16_t fp32_to_bf16(float f) {  // round to nearest even (NaN kept quiet)
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7FFF + ((x >> 16) & 1)) >> 16);
}

namespace gguf_writer_internal {
inline void put_u16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xFF));
  out->push_back(static_cast<char>(v >> 8));
}
}  // namespace gguf_writer_internal

// Quantizers following ggml's reference rounding (quantize_row_*_ref); `x` holds a whole
// number of 32-element blocks. They exist to build inputs; the reader's tests check the
// dequantizers against hand-computed blocks, not against these.
inline std::string quantize_q8_0(const std::vector<float>& x) {
  std::string out;
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    gguf_writer_internal::put_u16(&out, fp32_to_fp16(d));
    for (int j = 0; j < 32; ++j) out.push_back(static_cast<char>(static_cast<int8_t>(std::round(x[b + j] * id))));
  }
  return out;
}

inline std::string quantize_q4_0(const std::vector<float>& x) {
  std::string out;
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    float amax = 0, max = 0;  // max: the value of largest magnitude, with its sign
    for (int j = 0; j < 32; ++j) {
      if (std::fabs(x[b + j]) > amax) { amax = std::fabs(x[b + j]); max = x[b + j]; }
    }
    const float d = max / -8.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    gguf_writer_internal::put_u16(&out, fp32_to_fp16(d));
    for (int j = 0; j < 16; ++j) {
      const int lo = std::min(15, static_cast<int>(x[b + j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(x[b + j + 16] * id + 8.5f));
      out.push_back(static_cast<char>(lo | (hi << 4)));
    }
  }
  return out;
}

inline std::string quantize_q4_1(const std::vector<float>& x) {
  std::string out;
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    float lo = x[b], hi = x[b];
    for (int j = 1; j < 32; ++j) { lo = std::min(lo, x[b + j]); hi = std::max(hi, x[b + j]); }
    const float d = (hi - lo) / 15.f;
    const float id = d != 0 ? 1.f / d : 0.f;
    gguf_writer_internal::put_u16(&out, fp32_to_fp16(d));
    gguf_writer_internal::put_u16(&out, fp32_to_fp16(lo));
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[b + j] - lo) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[b + j + 16] - lo) * id + 0.5f));
      out.push_back(static_cast<char>(q0 | (q1 << 4)));
    }
  }
  return out;
}

// ---- the writer ---------------------------------------------------------------------------
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  GgufWriter& set_version(uint32_t version) { version_ = version; return *this; }
  GgufWriter& set_magic(uint32_t magic) { magic_ = magic; return *this; }
  // Adds `general.alignment` (uint32) and lays the data out with it.
  GgufWriter& set_alignment(uint32_t alignment) {
    alignment_ = alignment;
    return add("general.alignment", gguf_u32(alignment));
  }
  // Header counts written instead of the real ones (hostile files).
  GgufWriter& override_num_kv(uint64_t n) { num_kv_override_ = n; return *this; }
  GgufWriter& override_num_tensors(uint64_t n) { num_tensors_override_ = n; return *this; }

  GgufWriter& add(const std::string& key, const GgufValue& value) {
    std::string entry;
    put_string(&entry, key);
    put_u32(&entry, static_cast<uint32_t>(value.type));
    put_value(&entry, value);
    kv_bytes_ += entry;
    ++num_kv_;
    return *this;
  }
  // A metadata entry with an arbitrary type id and payload (hostile files).
  GgufWriter& add_raw(const std::string& key, uint32_t raw_type, const std::string& payload) {
    put_string(&kv_bytes_, key);
    put_u32(&kv_bytes_, raw_type);
    kv_bytes_ += payload;
    ++num_kv_;
    return *this;
  }

  // A tensor with raw encoded data (dims in ggml order, dims[0] fastest). Its offset is the
  // next aligned position unless `offset` is given; `raw_type` may be any id.
  GgufWriter& add_tensor_raw(const std::string& name, const std::vector<uint64_t>& dims, uint32_t raw_type,
                             std::string data, std::optional<uint64_t> offset = std::nullopt) {
    tensors_.push_back({name, dims, raw_type, std::move(data), offset});
    return *this;
  }
  GgufWriter& add_tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type,
                         std::string data) {
    return add_tensor_raw(name, dims, static_cast<uint32_t>(type), std::move(data));
  }
  GgufWriter& add_tensor_f32(const std::string& name, const std::vector<uint64_t>& dims,
                             const std::vector<float>& values) {
    std::string data(values.size() * 4, '\0');
    if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
    return add_tensor(name, dims, GgmlType::kF32, std::move(data));
  }
  GgufWriter& add_tensor_f16(const std::string& name, const std::vector<uint64_t>& dims,
                             const std::vector<float>& values) {
    std::string data;
    for (float v : values) gguf_writer_internal::put_u16(&data, fp32_to_fp16(v));
    return add_tensor(name, dims, GgmlType::kF16, std::move(data));
  }
  GgufWriter& add_tensor_bf16(const std::string& name, const std::vector<uint64_t>& dims,
                              const std::vector<float>& values) {
    std::string data;
    for (float v : values) gguf_writer_internal::put_u16(&data, fp32_to_bf16(v));
    return add_tensor(name, dims, GgmlType::kBF16, std::move(data));
  }
  GgufWriter& add_tensor_q8_0(const std::string& name, const std::vector<uint64_t>& dims,
                              const std::vector<float>& values) {
    return add_tensor(name, dims, GgmlType::kQ8_0, quantize_q8_0(values));
  }
  GgufWriter& add_tensor_q4_0(const std::string& name, const std::vector<uint64_t>& dims,
                              const std::vector<float>& values) {
    return add_tensor(name, dims, GgmlType::kQ4_0, quantize_q4_0(values));
  }
  GgufWriter& add_tensor_q4_1(const std::string& name, const std::vector<uint64_t>& dims,
                              const std::vector<float>& values) {
    return add_tensor(name, dims, GgmlType::kQ4_1, quantize_q4_1(values));
  }

  // The file image: header, metadata, tensor table, padding, data (each tensor padded).
  std::string bytes() const {
    std::string out;
    put_u32(&out, magic_);
    put_u32(&out, version_);
    put_u64(&out, num_tensors_override_.value_or(tensors_.size()));
    put_u64(&out, num_kv_override_.value_or(num_kv_));
    out += kv_bytes_;
    std::string data;
    for (const Tensor& t : tensors_) {
      data.resize(align(data.size()), '\0');
      put_string(&out, t.name);
      put_u32(&out, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) put_u64(&out, d);
      put_u32(&out, t.raw_type);
      put_u64(&out, t.offset.value_or(data.size()));
      data += t.data;
    }
    out.resize(align(out.size()), '\0');
    return out + data;
  }

  bool write_file(const std::string& path) const {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    const std::string image = bytes();
    f.write(image.data(), static_cast<std::streamsize>(image.size()));
    return static_cast<bool>(f);
  }

  // Encoders, public so that tests can build raw payloads for add_raw().
  static void put_u32(std::string* out, uint32_t v) { put_le(out, v, 4); }
  static void put_u64(std::string* out, uint64_t v) { put_le(out, v, 8); }
  static void put_string(std::string* out, const std::string& s) {
    put_u64(out, s.size());
    *out += s;
  }
  static void put_value(std::string* out, const GgufValue& v) {
    switch (v.type) {
      case GgufValueType::kUint8: put_le(out, v.uint_value, 1); break;
      case GgufValueType::kInt8: put_le(out, static_cast<uint64_t>(v.int_value), 1); break;
      case GgufValueType::kUint16: put_le(out, v.uint_value, 2); break;
      case GgufValueType::kInt16: put_le(out, static_cast<uint64_t>(v.int_value), 2); break;
      case GgufValueType::kUint32: put_le(out, v.uint_value, 4); break;
      case GgufValueType::kInt32: put_le(out, static_cast<uint64_t>(v.int_value), 4); break;
      case GgufValueType::kUint64: put_le(out, v.uint_value, 8); break;
      case GgufValueType::kInt64: put_le(out, static_cast<uint64_t>(v.int_value), 8); break;
      case GgufValueType::kFloat32:
        put_le(out, std::bit_cast<uint32_t>(static_cast<float>(v.float_value)), 4);
        break;
      case GgufValueType::kFloat64: put_le(out, std::bit_cast<uint64_t>(v.float_value), 8); break;
      case GgufValueType::kBool: put_le(out, v.bool_value ? 1 : 0, 1); break;
      case GgufValueType::kString: put_string(out, v.string_value); break;
      case GgufValueType::kArray:
        put_u32(out, static_cast<uint32_t>(v.element_type));
        put_u64(out, v.elements.size());
        for (const GgufValue& e : v.elements) put_value(out, e);
        break;
    }
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t raw_type;
    std::string data;
    std::optional<uint64_t> offset;
  };

  static void put_le(std::string* out, uint64_t v, int num_bytes) {
    for (int i = 0; i < num_bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  uint64_t align(uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

  uint32_t magic_ = 0x46554747;  // "GGUF"
  uint32_t version_;
  uint64_t alignment_ = 32;
  uint64_t num_kv_ = 0;
  std::string kv_bytes_;
  std::vector<Tensor> tensors_;
  std::optional<uint64_t> num_kv_override_;
  std::optional<uint64_t> num_tensors_override_;
};

}  // namespace flashserve::testing
