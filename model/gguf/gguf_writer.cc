// GgufWriter: in-memory and streaming GGUF images (see model/gguf/gguf_writer.h).
#include "model/gguf/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/bf16.h"
#include "base/status_macros.h"

namespace flashserve::model {

// ---- value constructors -----------------------------------------------------------------
GgufValue gguf_uint(GgufValueType type, uint64_t v) {
  GgufValue out;
  out.type = type;
  out.uint_value = v;
  return out;
}

GgufValue gguf_int(GgufValueType type, int64_t v) {
  GgufValue out;
  out.type = type;
  out.int_value = v;
  return out;
}

GgufValue gguf_f32(float v) {
  GgufValue out;
  out.type = GgufValueType::kFloat32;
  out.float_value = v;
  return out;
}

GgufValue gguf_f64(double v) {
  GgufValue out;
  out.type = GgufValueType::kFloat64;
  out.float_value = v;
  return out;
}

GgufValue gguf_bool(bool v) {
  GgufValue out;
  out.type = GgufValueType::kBool;
  out.bool_value = v;
  return out;
}

GgufValue gguf_string(std::string v) {
  GgufValue out;
  out.type = GgufValueType::kString;
  out.string_value = std::move(v);
  return out;
}

GgufValue gguf_array(GgufValueType element_type, std::vector<GgufValue> elements) {
  GgufValue out;
  out.type = GgufValueType::kArray;
  out.element_type = element_type;
  out.elements = std::move(elements);
  return out;
}

GgufValue gguf_string_array(const std::vector<std::string>& v) {
  std::vector<GgufValue> elements;
  elements.reserve(v.size());
  for (const std::string& s : v) elements.push_back(gguf_string(s));
  return gguf_array(GgufValueType::kString, std::move(elements));
}

GgufValue gguf_i32_array(const std::vector<int32_t>& v) {
  std::vector<GgufValue> elements;
  elements.reserve(v.size());
  for (int32_t x : v) elements.push_back(gguf_i32(x));
  return gguf_array(GgufValueType::kInt32, std::move(elements));
}

GgufValue gguf_f32_array(const std::vector<float>& v) {
  std::vector<GgufValue> elements;
  elements.reserve(v.size());
  for (float x : v) elements.push_back(gguf_f32(x));
  return gguf_array(GgufValueType::kFloat32, std::move(elements));
}

// ---- building ------------------------------------------------------------------------------
GgufWriter& GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  return add("general.alignment", gguf_u32(alignment));
}

GgufWriter& GgufWriter::add(const std::string& key, const GgufValue& value) {
  put_string(&kv_bytes_, key);
  put_u32(&kv_bytes_, static_cast<uint32_t>(value.type));
  put_value(&kv_bytes_, value);
  ++num_kv_;
  return *this;
}

GgufWriter& GgufWriter::add_raw(const std::string& key, uint32_t raw_type, const std::string& payload) {
  put_string(&kv_bytes_, key);
  put_u32(&kv_bytes_, raw_type);
  kv_bytes_ += payload;
  ++num_kv_;
  return *this;
}

GgufWriter& GgufWriter::add_tensor_raw(const std::string& name, const std::vector<uint64_t>& dims,
                                       uint32_t raw_type, std::string data, std::optional<uint64_t> offset) {
  tensors_.push_back({name, dims, raw_type, std::move(data), offset, false});
  return *this;
}

GgufWriter& GgufWriter::add_tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type,
                                   std::string data) {
  return add_tensor_raw(name, dims, static_cast<uint32_t>(type), std::move(data));
}

GgufWriter& GgufWriter::add_tensor_f32(const std::string& name, const std::vector<uint64_t>& dims,
                                       const std::vector<float>& values) {
  std::string data(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
  return add_tensor(name, dims, GgmlType::kF32, std::move(data));
}

GgufWriter& GgufWriter::add_tensor_f16(const std::string& name, const std::vector<uint64_t>& dims,
                                       const std::vector<float>& values) {
  std::string data;
  data.reserve(values.size() * 2);
  for (float v : values) put_le(&data, fp32_to_fp16(v), 2);
  return add_tensor(name, dims, GgmlType::kF16, std::move(data));
}

GgufWriter& GgufWriter::add_tensor_bf16(const std::string& name, const std::vector<uint64_t>& dims,
                                        const std::vector<float>& values) {
  std::string data;
  data.reserve(values.size() * 2);
  for (float v : values) put_le(&data, fp32_to_bf16_bits(v), 2);
  return add_tensor(name, dims, GgmlType::kBF16, std::move(data));
}

GgufWriter& GgufWriter::add_tensor_q8_0(const std::string& name, const std::vector<uint64_t>& dims,
                                        const std::vector<float>& values) {
  return add_tensor(name, dims, GgmlType::kQ8_0, quantize_q8_0(values));
}

GgufWriter& GgufWriter::add_tensor_q4_0(const std::string& name, const std::vector<uint64_t>& dims,
                                        const std::vector<float>& values) {
  return add_tensor(name, dims, GgmlType::kQ4_0, quantize_q4_0(values));
}

GgufWriter& GgufWriter::add_tensor_q4_1(const std::string& name, const std::vector<uint64_t>& dims,
                                        const std::vector<float>& values) {
  return add_tensor(name, dims, GgmlType::kQ4_1, quantize_q4_1(values));
}

GgufWriter& GgufWriter::declare_tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type) {
  tensors_.push_back({name, dims, static_cast<uint32_t>(type), std::string(), std::nullopt, true});
  return *this;
}

// ---- encoding ------------------------------------------------------------------------------
void GgufWriter::put_le(std::string* out, uint64_t v, int num_bytes) {
  for (int i = 0; i < num_bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void GgufWriter::put_string(std::string* out, const std::string& s) {
  put_u64(out, s.size());
  *out += s;
}

void GgufWriter::put_value(std::string* out, const GgufValue& v) {
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

absl::StatusOr<uint64_t> GgufWriter::data_size(const Tensor& t) const {
  if (!t.declared) return t.data.size();
  const GgmlType type = static_cast<GgmlType>(t.raw_type);
  int64_t num_elements = 1;
  for (uint64_t d : t.dims) {
    if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(num_elements, static_cast<int64_t>(d), &num_elements)) {
      return absl::InvalidArgumentError(absl::StrCat("gguf writer: tensor '", t.name, "' has too many elements"));
    }
  }
  const GgmlTypeTraits traits = ggml_type_traits(type);
  if (traits.block_size == 0 || t.dims.empty() || t.dims[0] % traits.block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gguf writer: tensor '", t.name, "' of type ", ggml_type_name(type), " has rows of ",
        t.dims.empty() ? 0 : t.dims[0], " elements, not a whole number of blocks of ", traits.block_size));
  }
  return static_cast<uint64_t>(num_elements / traits.block_size * traits.block_bytes);
}

absl::StatusOr<std::string> GgufWriter::header() const {
  std::string out;
  put_u32(&out, magic_);
  put_u32(&out, version_);
  put_u64(&out, num_tensors_override_.value_or(tensors_.size()));
  put_u64(&out, num_kv_override_.value_or(num_kv_));
  out += kv_bytes_;
  uint64_t data_end = 0;
  for (const Tensor& t : tensors_) {
    data_end = align(data_end);
    put_string(&out, t.name);
    put_u32(&out, static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) put_u64(&out, d);
    put_u32(&out, t.raw_type);
    put_u64(&out, t.offset.value_or(data_end));
    ASSIGN_OR_RETURN(const uint64_t size, data_size(t));
    data_end += size;
  }
  out.resize(align(out.size()), '\0');
  return out;
}

std::string GgufWriter::bytes() const {
  absl::StatusOr<std::string> out = header();
  if (!out.ok()) return std::string();  // only declared tensors can fail; see the header
  std::string data;
  for (const Tensor& t : tensors_) {
    data.resize(align(data.size()), '\0');
    if (t.declared) {
      data.resize(data.size() + data_size(t).value_or(0), '\0');
    } else {
      data += t.data;
    }
  }
  return *out + data;
}

// ---- streaming to a file -------------------------------------------------------------------
namespace {

absl::Status io_error(const std::string& what, const std::string& path) {
  return absl::InvalidArgumentError(absl::StrCat("gguf writer: ", what, " '", path, "': ", std::strerror(errno)));
}

}  // namespace

absl::Status GgufWriter::write_stream(std::FILE* f, const std::string& path, const TensorDataFn& fill) const {
  ASSIGN_OR_RETURN(const std::string head, header());
  auto write = [&](const char* p, size_t n) {
    return n == 0 || std::fwrite(p, 1, n, f) == n ? absl::OkStatus() : io_error("cannot write", path);
  };
  RETURN_IF_ERROR(write(head.data(), head.size()));
  uint64_t position = 0;  // within the data section
  std::string data;
  const std::string padding(alignment_, '\0');
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    RETURN_IF_ERROR(write(padding.data(), align(position) - position));
    position = align(position);
    const uint64_t size = *data_size(t);  // checked by header()
    if (t.declared) {
      if (!fill) return absl::InvalidArgumentError(absl::StrCat("gguf writer: tensor '", t.name, "' has no data"));
      data.clear();
      RETURN_IF_ERROR(fill(i, &data));
      if (data.size() != size) {
        return absl::InternalError(absl::StrCat("gguf writer: tensor '", t.name, "' got ", data.size(),
                                                " bytes of data, its dims and type need ", size));
      }
    }
    const std::string& bytes = t.declared ? data : t.data;
    RETURN_IF_ERROR(write(bytes.data(), bytes.size()));
    position += size;
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::write_file(const std::string& path, const TensorDataFn& fill) const {
  const std::string part = path + ".part";
  std::FILE* f = std::fopen(part.c_str(), "wb");
  if (f == nullptr) return io_error("cannot create", part);
  absl::Status status = write_stream(f, part, fill);
  if (std::fclose(f) != 0 && status.ok()) status = io_error("cannot write", part);
  if (status.ok() && std::rename(part.c_str(), path.c_str()) != 0) {
    status = io_error("cannot rename to", path);
  }
  if (!status.ok()) std::remove(part.c_str());
  return status;
}

}  // namespace flashserve::model
