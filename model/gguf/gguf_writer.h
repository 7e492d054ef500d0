#pragma once
// A GGUF (v2/v3) writer: metadata of every value type (nested arrays too) and tensors of any
// ggml type, written either as an in-memory image (tests) or streamed to a file tensor by
// tensor (model tools: a tensor declared without data is produced by a callback while the
// file is written, so a multi-GB model never has to be in memory at once). The layout is
// the one model/gguf/gguf.h reads; hooks also produce hostile files (wrong header counts,
// raw value types, explicit tensor offsets) for the reader's tests.
//
// Typical use:
//   GgufWriter w;
//   w.add("general.architecture", gguf_string("llama"))
//    .add("tokenizer.ggml.tokens", gguf_string_array({"a", "b"}));
//   w.add_tensor_q4_1("blk.0.attn_q.weight", {64, 2}, values);  // dims in ggml order
//   w.declare_tensor("token_embd.weight", {64, 50000}, GgmlType::kQ8_0);
//   absl::Status s = w.write_file(path, [&](size_t index, std::string* data) { ... });
//
// Thread-safety: none (build on one thread); write_file calls `fill` on the calling thread.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/gguf/ggml_type.h"
#include "model/gguf/gguf.h"
#include "model/gguf/quantize.h"

namespace flashserve::model {

// ---- value constructors -----------------------------------------------------------------
GgufValue gguf_uint(GgufValueType type, uint64_t v);
GgufValue gguf_int(GgufValueType type, int64_t v);
inline GgufValue gguf_u8(uint8_t v) { return gguf_uint(GgufValueType::kUint8, v); }
inline GgufValue gguf_u16(uint16_t v) { return gguf_uint(GgufValueType::kUint16, v); }
inline GgufValue gguf_u32(uint32_t v) { return gguf_uint(GgufValueType::kUint32, v); }
inline GgufValue gguf_u64(uint64_t v) { return gguf_uint(GgufValueType::kUint64, v); }
inline GgufValue gguf_i8(int8_t v) { return gguf_int(GgufValueType::kInt8, v); }
inline GgufValue gguf_i16(int16_t v) { return gguf_int(GgufValueType::kInt16, v); }
inline GgufValue gguf_i32(int32_t v) { return gguf_int(GgufValueType::kInt32, v); }
inline GgufValue gguf_i64(int64_t v) { return gguf_int(GgufValueType::kInt64, v); }
GgufValue gguf_f32(float v);
GgufValue gguf_f64(double v);
GgufValue gguf_bool(bool v);
GgufValue gguf_string(std::string v);
// An array; every element must have type `element_type` (elements may be arrays).
GgufValue gguf_array(GgufValueType element_type, std::vector<GgufValue> elements);
GgufValue gguf_string_array(const std::vector<std::string>& v);
GgufValue gguf_i32_array(const std::vector<int32_t>& v);
GgufValue gguf_f32_array(const std::vector<float>& v);

// ---- the writer ---------------------------------------------------------------------------
class GgufWriter {
 public:
  // Produces the data of the declared tensor `tensor_index` (index in add order) into
  // `data`; it must be exactly the tensor's size (num_elements / block_size * block_bytes).
  using TensorDataFn = std::function<absl::Status(size_t tensor_index, std::string* data)>;

  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  GgufWriter& set_version(uint32_t version) { version_ = version; return *this; }
  GgufWriter& set_magic(uint32_t magic) { magic_ = magic; return *this; }
  // Adds `general.alignment` (uint32) and lays the data out with it.
  GgufWriter& set_alignment(uint32_t alignment);
  // Header counts written instead of the real ones (hostile files).
  GgufWriter& override_num_kv(uint64_t n) { num_kv_override_ = n; return *this; }
  GgufWriter& override_num_tensors(uint64_t n) { num_tensors_override_ = n; return *this; }

  GgufWriter& add(const std::string& key, const GgufValue& value);
  // A metadata entry with an arbitrary type id and payload (hostile files).
  GgufWriter& add_raw(const std::string& key, uint32_t raw_type, const std::string& payload);

  // A tensor with raw encoded data (dims in ggml order, dims[0] fastest). Its offset is the
  // next aligned position unless `offset` is given; `raw_type` may be any id.
  GgufWriter& add_tensor_raw(const std::string& name, const std::vector<uint64_t>& dims, uint32_t raw_type,
                             std::string data, std::optional<uint64_t> offset = std::nullopt);
  GgufWriter& add_tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type,
                         std::string data);
  // Tensors from fp32 values, encoded with model/gguf/quantize.h.
  GgufWriter& add_tensor_f32(const std::string& name, const std::vector<uint64_t>& dims,
                             const std::vector<float>& values);
  GgufWriter& add_tensor_f16(const std::string& name, const std::vector<uint64_t>& dims,
                             const std::vector<float>& values);
  GgufWriter& add_tensor_bf16(const std::string& name, const std::vector<uint64_t>& dims,
                              const std::vector<float>& values);
  GgufWriter& add_tensor_q8_0(const std::string& name, const std::vector<uint64_t>& dims,
                              const std::vector<float>& values);
  GgufWriter& add_tensor_q4_0(const std::string& name, const std::vector<uint64_t>& dims,
                              const std::vector<float>& values);
  GgufWriter& add_tensor_q4_1(const std::string& name, const std::vector<uint64_t>& dims,
                              const std::vector<float>& values);
  // A tensor whose data write_file's `fill` produces. Its size follows from dims and type;
  // a type we cannot size or a row that is not a whole number of blocks makes write_file
  // fail with InvalidArgument naming the tensor.
  GgufWriter& declare_tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type);

  size_t num_tensors() const { return tensors_.size(); }

  // The file image: header, metadata, tensor table, padding, data (each tensor aligned).
  // Declared tensors are written as zeros here; the image is empty when a declared tensor
  // has no valid size (write_file reports that as an error).
  std::string bytes() const;

  // Streams the image to `path`: written to `path + ".part"` and renamed on success, so a
  // failed or interrupted write never leaves a file that looks complete. Declared tensors
  // take their data from `fill` (required when there are any). Errors name the path or the
  // tensor: InvalidArgument for a declared tensor with no valid size, Internal when `fill`
  // returns the wrong number of bytes, its own status when it fails, and the system's
  // error for I/O failures.
  absl::Status write_file(const std::string& path, const TensorDataFn& fill = nullptr) const;

  // Encoders, public so that tests can build raw payloads for add_raw().
  static void put_u32(std::string* out, uint32_t v) { put_le(out, v, 4); }
  static void put_u64(std::string* out, uint64_t v) { put_le(out, v, 8); }
  static void put_string(std::string* out, const std::string& s);
  static void put_value(std::string* out, const GgufValue& v);

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t raw_type;
    std::string data;                 // empty for declared tensors
    std::optional<uint64_t> offset;   // explicit offset (hostile files)
    bool declared = false;
  };

  static void put_le(std::string* out, uint64_t v, int num_bytes);
  uint64_t align(uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }
  // Bytes of a tensor's data: data.size(), or its computed size when declared.
  absl::StatusOr<uint64_t> data_size(const Tensor& t) const;
  // Header, metadata, tensor table and the padding before the data section.
  absl::StatusOr<std::string> header() const;
  // Writes the whole image to `f` (named `path` in errors).
  absl::Status write_stream(std::FILE* f, const std::string& path, const TensorDataFn& fill) const;

  uint32_t magic_ = 0x46554747;  // "GGUF"
  uint32_t version_;
  uint64_t alignment_ = 32;
  uint64_t num_kv_ = 0;
  std::string kv_bytes_;
  std::vector<Tensor> tensors_;
  std::optional<uint64_t> num_kv_override_;
  std::optional<uint64_t> num_tensors_override_;
};

}  // namespace flashserve::model
