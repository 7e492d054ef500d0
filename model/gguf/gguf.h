#pragma once
// GGUF reader (versions 2 and 3; https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
//
// Layout of a file (all integers little-endian):
//   magic "GGUF" | uint32 version | uint64 num_tensors | uint64 num_kv
//   num_kv x   { string key | uint32 value_type | value }
//   num_tensors x { string name | uint32 n_dims | n_dims x uint64 dims | uint32 ggml_type
//                   | uint64 offset }
//   padding to `general.alignment` (default 32) | tensor data (each offset aligned too)
// A string is uint64 length + bytes (no NUL); an array is uint32 element_type + uint64 count
// + elements (elements may themselves be arrays).
//
// The reader never trusts the file: every length, count and offset is checked against the
// bytes that remain (with overflow-safe arithmetic) before anything is read or reserved.
// Errors: DataLoss for truncated / inconsistent files, InvalidArgument for values that are
// well-formed but invalid (bad alignment, duplicate keys), Unimplemented for valid but
// unsupported features (GGUF v1, unknown tensor types when dequantizing).
//
// Thread-safety: a GgufFile is immutable after open(); const methods may be called
// concurrently.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gguf/ggml_type.h"

namespace flashserve::model {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint8", "string", "array", ...; "unknown(<id>)" otherwise.
std::string gguf_value_type_name(GgufValueType type);

// One metadata value. Exactly the fields for `type` are meaningful:
//   unsigned integer types: `uint_value`; signed integer types: `int_value`;
//   kFloat32 / kFloat64: `float_value` (kFloat32 is widened exactly);
//   kBool: `bool_value`; kString: `string_value`;
//   kArray: `element_type` and `elements` (each element has type == element_type; an
//   element may itself be an array).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t uint_value = 0;
  int64_t int_value = 0;
  double float_value = 0;
  bool bool_value = false;
  std::string string_value;
  GgufValueType element_type = GgufValueType::kUint8;
  std::vector<GgufValue> elements;

  bool is_unsigned() const;  // kUint8/16/32/64
  bool is_signed() const;    // kInt8/16/32/64
  bool is_integer() const { return is_unsigned() || is_signed(); }
  bool is_float() const { return type == GgufValueType::kFloat32 || type == GgufValueType::kFloat64; }
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: dims[0] is the fastest-varying (row length)
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;        // relative to the data section
  int64_t num_elements = 0;   // product of dims
  uint64_t num_bytes = 0;     // num_elements / block_size * block_bytes
  const uint8_t* data = nullptr;  // points into the mapping (valid while the GgufFile lives)

  int64_t row_length() const { return dims.empty() ? 1 : dims[0]; }
  int64_t num_rows() const { return dims.empty() || dims[0] == 0 ? 0 : num_elements / dims[0]; }
};

class GgufFile {
 public:
  // Maps the file read-only and parses header, metadata and tensor table.
  static absl::StatusOr<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Parses an in-memory image (tests); the bytes are owned by the returned file.
  static absl::StatusOr<std::unique_ptr<GgufFile>> from_bytes(std::string bytes);

  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // start of the data section
  uint64_t file_size() const { return size_; }

  // Metadata in file order. nullptr if absent.
  const GgufValue* find(std::string_view key) const;
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }

  // Typed getters: NotFound naming the key if absent, InvalidArgument naming key and actual
  // type if of the wrong type. get_int accepts any integer type (range-checked into
  // int64), get_float any float or integer type. Array getters require an array of
  // elements that the scalar getter would accept.
  absl::StatusOr<std::string> get_string(std::string_view key) const;
  absl::StatusOr<int64_t> get_int(std::string_view key) const;
  absl::StatusOr<double> get_float(std::string_view key) const;
  absl::StatusOr<bool> get_bool(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> get_string_array(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> get_int_array(std::string_view key) const;
  absl::StatusOr<std::vector<float>> get_float_array(std::string_view key) const;

  // Tensors in file order. nullptr if absent.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  // Dequantizes the whole tensor to fp32 in ggml element order (row-major with dims[0]
  // fastest). Unimplemented (naming the type) for unsupported types.
  absl::StatusOr<std::vector<float>> dequantize(const GgufTensorInfo& t) const;
  // The same into `out`, resized to the tensor's element count: when `out` already holds
  // that many values its memory is reused as it is. A loader that converts one layer at a
  // time passes the same vectors for every layer, so their pages are first touched once
  // (fresh pages of a new vector cost ~2.5x a write of touched ones, on one core: most of
  // an 8B bf16 start-up's host time, bench/serving/NOTES.md step 35).
  absl::Status dequantize_into(const GgufTensorInfo& t, std::vector<float>* out) const;

 private:
  GgufFile() = default;
  absl::Status parse();
  absl::Status place_tensors(uint64_t end_of_table);  // sets data_offset_ and data
  absl::StatusOr<const GgufValue*> find_or_error(std::string_view key) const;

  // The image: either an mmap (mapping_ != nullptr) or owned_bytes_.
  void* mapping_ = nullptr;
  std::string owned_bytes_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;

  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

// OK if every tensor of `file` has a type dequantize() supports; otherwise Unimplemented
// naming the first tensor (file order) that does not: "gguf: tensor 'X' has type iq2_xxs,
// which flashserve cannot read (supported: f32, ...)". Loaders call it before sizing
// anything from the file, so an unsupported type is never reported as something else.
absl::Status check_tensor_types(const GgufFile& file);

}  // namespace flashserve::model
