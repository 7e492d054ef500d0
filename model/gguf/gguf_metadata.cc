// Lookups on a parsed GgufFile: typed metadata getters, tensors, dequantization.
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "model/gguf/dequant.h"
#include "model/gguf/gguf.h"

namespace flashserve::model {

std::string gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "uint8";
    case GgufValueType::kInt8: return "int8";
    case GgufValueType::kUint16: return "uint16";
    case GgufValueType::kInt16: return "int16";
    case GgufValueType::kUint32: return "uint32";
    case GgufValueType::kInt32: return "int32";
    case GgufValueType::kFloat32: return "float32";
    case GgufValueType::kBool: return "bool";
    case GgufValueType::kString: return "string";
    case GgufValueType::kArray: return "array";
    case GgufValueType::kUint64: return "uint64";
    case GgufValueType::kInt64: return "int64";
    case GgufValueType::kFloat64: return "float64";
  }
  return absl::StrCat("unknown(", static_cast<uint32_t>(type), ")");
}

bool GgufValue::is_unsigned() const {
  return type == GgufValueType::kUint8 || type == GgufValueType::kUint16 ||
         type == GgufValueType::kUint32 || type == GgufValueType::kUint64;
}

bool GgufValue::is_signed() const {
  return type == GgufValueType::kInt8 || type == GgufValueType::kInt16 ||
         type == GgufValueType::kInt32 || type == GgufValueType::kInt64;
}

namespace {

// absl::string_view is not std::string_view in Debian's abseil build.
absl::string_view absl_view(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// "array of string", "uint32", ...
std::string describe_type(const GgufValue& value) {
  if (value.type != GgufValueType::kArray) return gguf_value_type_name(value.type);
  return absl::StrCat("array of ", gguf_value_type_name(value.element_type));
}

absl::Status wrong_type(absl::string_view key, const GgufValue& value, absl::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("gguf: metadata '", key, "' has type ", describe_type(value),
                                                 ", expected ", expected));
}

// Integer value of an integer-typed scalar; InvalidArgument if above int64's range.
absl::StatusOr<int64_t> to_int(absl::string_view key, const GgufValue& value) {
  if (value.is_signed()) return value.int_value;
  if (value.uint_value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: metadata '", key, "' value ", value.uint_value,
                                                   " does not fit in int64"));
  }
  return static_cast<int64_t>(value.uint_value);
}

double to_double(const GgufValue& value) {
  if (value.is_float()) return value.float_value;
  if (value.is_signed()) return static_cast<double>(value.int_value);
  return static_cast<double>(value.uint_value);
}

}  // namespace

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [name, value] : metadata_) {
    if (name == key) return &value;
  }
  return nullptr;
}

absl::StatusOr<const GgufValue*> GgufFile::find_or_error(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return absl::NotFoundError(absl::StrCat("gguf: metadata key '", absl_view(key), "' not found"));
  return value;
}

absl::StatusOr<std::string> GgufFile::get_string(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* const value, find_or_error(key));
  if (value->type != GgufValueType::kString) return wrong_type(absl_view(key), *value, "string");
  return value->string_value;
}

absl::StatusOr<int64_t> GgufFile::get_int(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* const value, find_or_error(key));
  if (!value->is_integer()) return wrong_type(absl_view(key), *value, "an integer");
  return to_int(absl_view(key), *value);
}

absl::StatusOr<double> GgufFile::get_float(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* const value, find_or_error(key));
  if (!value->is_float() && !value->is_integer()) return wrong_type(absl_view(key), *value, "a number");
  return to_double(*value);
}

absl::StatusOr<bool> GgufFile::get_bool(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* const value, find_or_error(key));
  if (value->type != GgufValueType::kBool) return wrong_type(absl_view(key), *value, "bool");
  return value->bool_value;
}

absl::StatusOr<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* const found, find_or_error(key));
  const GgufValue& v = *found;
  if (v.type != GgufValueType::kArray || v.element_type != GgufValueType::kString) {
    return wrong_type(absl_view(key), v, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(v.elements.size());
  for (const GgufValue& e : v.elements) out.push_back(e.string_value);
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* const found, find_or_error(key));
  const GgufValue& v = *found;
  GgufValue probe;
  probe.type = v.element_type;
  if (v.type != GgufValueType::kArray || !probe.is_integer()) return wrong_type(absl_view(key), v, "array of integers");
  std::vector<int64_t> out;
  out.reserve(v.elements.size());
  for (const GgufValue& e : v.elements) {
    ASSIGN_OR_RETURN(const int64_t i, to_int(absl_view(key), e));
    out.push_back(i);
  }
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  ASSIGN_OR_RETURN(const GgufValue* const found, find_or_error(key));
  const GgufValue& v = *found;
  GgufValue probe;
  probe.type = v.element_type;
  if (v.type != GgufValueType::kArray || !(probe.is_float() || probe.is_integer())) {
    return wrong_type(absl_view(key), v, "array of numbers");
  }
  std::vector<float> out;
  out.reserve(v.elements.size());
  for (const GgufValue& e : v.elements) out.push_back(static_cast<float>(to_double(e)));
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

absl::Status unreadable_type_error(const GgufTensorInfo& t) {
  return absl::UnimplementedError(absl::StrCat("gguf: tensor '", t.name, "' has type ", ggml_type_name(t.type),
                                               ", which flashserve cannot read (supported: ",
                                               dequantizable_type_names(), ")"));
}

}  // namespace

absl::Status check_tensor_types(const GgufFile& file) {
  for (const GgufTensorInfo& t : file.tensors()) {
    if (!ggml_type_can_dequantize(t.type)) return unreadable_type_error(t);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> GgufFile::dequantize(const GgufTensorInfo& t) const {
  std::vector<float> out;
  RETURN_IF_ERROR(dequantize_into(t, &out));
  return out;
}

absl::Status GgufFile::dequantize_into(const GgufTensorInfo& t, std::vector<float>* out) const {
  if (!ggml_type_can_dequantize(t.type)) return unreadable_type_error(t);
  if (t.data == nullptr && t.num_elements > 0) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", t.name, "' has no data in this file"));
  }
  out->resize(static_cast<size_t>(t.num_elements));
  return dequantize_row(t.type, t.data, t.num_elements, out->data());
}

}  // namespace flashserve::model
