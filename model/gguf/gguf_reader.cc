// Parsing of the GGUF image: header, metadata, tensor table, data section (see gguf.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string_view>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"
#include "model/gguf/gguf.h"

namespace flashserve::model {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;           // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;     // nesting limit for arrays of arrays
// Bound on array elements over the whole metadata, so that a small hostile file cannot make
// us build hundreds of millions of GgufValues. Real tokenizers hold < 1M (vocab, scores,
// types, merges of a 256k vocabulary).
constexpr uint64_t kMaxMetadataArrayElements = uint64_t{1} << 22;
// Smallest encoding of one tensor-table entry: name length, n_dims, type, offset.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
constexpr uint64_t kMinKeyValueBytes = 8 + 4;  // key length + value type

// Bytes of a scalar value of `type`; 0 for string, array and unknown types.
uint64_t scalar_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    default: return 0;
  }
}

bool is_known_value_type(uint32_t raw) { return raw <= static_cast<uint32_t>(GgufValueType::kFloat64); }

// Minimum bytes one array element of `type` occupies in the file.
uint64_t min_element_size(GgufValueType type) {
  if (type == GgufValueType::kString) return 8;
  if (type == GgufValueType::kArray) return 4 + 8;
  return scalar_size(type);
}

uint64_t load_le(const uint8_t* p, int num_bytes) {
  uint64_t v = 0;
  for (int i = num_bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Reads from the image; every read checks the bytes that remain first.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  absl::Status need(uint64_t num_bytes, absl::string_view what) const {
    if (num_bytes > remaining()) {
      return absl::DataLossError(absl::StrCat("gguf: truncated file: ", what, " needs ", num_bytes,
                                              " bytes at offset ", pos_, " but only ", remaining(),
                                              " remain (file is ", size_, " bytes)"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t> read_uint(int num_bytes, absl::string_view what) {
    RETURN_IF_ERROR(need(num_bytes, what));
    uint64_t v = load_le(base_ + pos_, num_bytes);
    pos_ += num_bytes;
    return v;
  }

  absl::Status read_string(absl::string_view what, std::string* out) {
    ASSIGN_OR_RETURN(const uint64_t length, read_uint(8, what));
    if (length > remaining()) {
      return absl::DataLossError(absl::StrCat("gguf: ", what, " length ", length, " at offset ",
                                              pos_ - 8, " runs past the end of the file (",
                                              remaining(), " bytes remain)"));
    }
    out->assign(reinterpret_cast<const char*>(base_ + pos_), length);
    pos_ += length;
    return absl::OkStatus();
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

class MetadataParser {
 public:
  explicit MetadataParser(Cursor* cursor) : cursor_(cursor) {}

  absl::Status parse_value(GgufValueType type, int depth, absl::string_view key, GgufValue* out) {
    out->type = type;
    switch (type) {
      case GgufValueType::kString: return cursor_->read_string(absl::StrCat("string value of '", key, "'"), &out->string_value);
      case GgufValueType::kArray: return parse_array(depth, key, out);
      default: return parse_scalar(type, key, out);
    }
  }

 private:
  absl::Status parse_scalar(GgufValueType type, absl::string_view key, GgufValue* out) {
    const int num_bytes = static_cast<int>(scalar_size(type));
    ASSIGN_OR_RETURN(uint64_t bits, cursor_->read_uint(num_bytes, absl::StrCat("value of '", key, "'")));
    const int num_bits = 8 * num_bytes;
    switch (type) {
      case GgufValueType::kUint8:
      case GgufValueType::kUint16:
      case GgufValueType::kUint32:
      case GgufValueType::kUint64: out->uint_value = bits; break;
      case GgufValueType::kInt8:
      case GgufValueType::kInt16:
      case GgufValueType::kInt32:
      case GgufValueType::kInt64: {
        // Sign-extend the low num_bits bits.
        const uint64_t sign_bit = uint64_t{1} << (num_bits - 1);
        out->int_value = static_cast<int64_t>((bits ^ sign_bit) - sign_bit);
        break;
      }
      case GgufValueType::kFloat32: out->float_value = std::bit_cast<float>(static_cast<uint32_t>(bits)); break;
      case GgufValueType::kFloat64: out->float_value = std::bit_cast<double>(bits); break;
      case GgufValueType::kBool:
        if (bits > 1) {
          return absl::DataLossError(absl::StrCat("gguf: bool value of '", key, "' is ", bits, ", not 0 or 1"));
        }
        out->bool_value = bits == 1;
        break;
      default: break;  // string/array handled by the caller
    }
    return absl::OkStatus();
  }

  absl::Status parse_array(int depth, absl::string_view key, GgufValue* out) {
    if (depth >= kMaxArrayDepth) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: array value of '", key, "' is nested deeper than ",
                                                     kMaxArrayDepth, " levels"));
    }
    ASSIGN_OR_RETURN(uint64_t raw_type, cursor_->read_uint(4, absl::StrCat("array element type of '", key, "'")));
    if (!is_known_value_type(static_cast<uint32_t>(raw_type))) {
      return absl::DataLossError(absl::StrCat("gguf: array '", key, "' has unknown element type ", raw_type));
    }
    out->element_type = static_cast<GgufValueType>(raw_type);
    ASSIGN_OR_RETURN(uint64_t count, cursor_->read_uint(8, absl::StrCat("array length of '", key, "'")));
    // Check the count against the bytes that remain before reserving anything.
    const uint64_t element_size = min_element_size(out->element_type);
    if (count > cursor_->remaining() / element_size) {
      return absl::DataLossError(absl::StrCat("gguf: array '", key, "' claims ", count, " elements of type ",
                                              gguf_value_type_name(out->element_type), " but only ",
                                              cursor_->remaining(), " bytes remain"));
    }
    num_array_elements_ += count;
    if (num_array_elements_ > kMaxMetadataArrayElements) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: metadata arrays hold more than ",
                                                     kMaxMetadataArrayElements, " elements in total (at '",
                                                     key, "', ", count, " elements)"));
    }
    out->elements.resize(count);
    for (GgufValue& element : out->elements) {
      RETURN_IF_ERROR(parse_value(out->element_type, depth + 1, key, &element));
    }
    return absl::OkStatus();
  }

  Cursor* cursor_;
  uint64_t num_array_elements_ = 0;
};

// Rounds `value` up to a multiple of the power of two `alignment`; false on overflow.
bool align_up(uint64_t value, uint64_t alignment, uint64_t* out) {
  const uint64_t mask = alignment - 1;
  if (value > std::numeric_limits<uint64_t>::max() - mask) return false;
  *out = (value + mask) & ~mask;
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::from_bytes(std::string bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->owned_bytes_ = std::move(bytes);
  file->base_ = reinterpret_cast<const uint8_t*>(file->owned_bytes_.data());
  file->size_ = file->owned_bytes_.size();
  RETURN_IF_ERROR(file->parse());
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string message = absl::StrCat("gguf: cannot open '", path, "': ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("gguf: '", path, "' is not a regular file"));
  }
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* mapping = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("gguf: mmap of '", path, "' failed: ", std::strerror(err)));
    }
    file->mapping_ = mapping;
    file->base_ = static_cast<const uint8_t*>(mapping);
  }
  ::close(fd);
  if (absl::Status s = file->parse(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " [", path, "]"));
  }
  return file;
}

GgufFile::~GgufFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

namespace {

absl::Status parse_header(Cursor* cursor, uint32_t* version, uint64_t* num_tensors, uint64_t* num_kv) {
  if (cursor->remaining() < 4) {
    return absl::DataLossError(absl::StrCat("gguf: file is ", cursor->remaining(),
                                            " bytes, too small for the 'GGUF' magic"));
  }
  ASSIGN_OR_RETURN(uint64_t magic, cursor->read_uint(4, "magic"));
  if (magic != kGgufMagic) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: bad magic 0x", absl::Hex(magic, absl::kZeroPad8),
                                                   " (expected 'GGUF'): not a GGUF file"));
  }
  ASSIGN_OR_RETURN(uint64_t raw_version, cursor->read_uint(4, "version"));
  if (raw_version == 1) {
    return absl::UnimplementedError("gguf: version 1 files are not supported (convert to version 2 or 3)");
  }
  if ((raw_version & 0xFFFF) == 0 && raw_version != 0) {  // e.g. 0x03000000: byte-swapped
    return absl::UnimplementedError(absl::StrCat("gguf: version field 0x", absl::Hex(raw_version),
                                                 " looks byte-swapped: big-endian GGUF files are not supported"));
  }
  if (raw_version != 2 && raw_version != 3) {
    return absl::UnimplementedError(absl::StrCat("gguf: unsupported version ", raw_version,
                                                 " (supported: 2, 3)"));
  }
  *version = static_cast<uint32_t>(raw_version);
  ASSIGN_OR_RETURN(uint64_t tensors, cursor->read_uint(8, "tensor count"));
  ASSIGN_OR_RETURN(uint64_t kvs, cursor->read_uint(8, "metadata count"));
  if (kvs > cursor->remaining() / kMinKeyValueBytes) {
    return absl::DataLossError(absl::StrCat("gguf: header claims ", kvs, " metadata entries but only ",
                                            cursor->remaining(), " bytes remain"));
  }
  if (tensors > cursor->remaining() / kMinTensorInfoBytes) {
    return absl::DataLossError(absl::StrCat("gguf: header claims ", tensors, " tensors but only ",
                                            cursor->remaining(), " bytes remain"));
  }
  *num_tensors = tensors;
  *num_kv = kvs;
  return absl::OkStatus();
}

// Reads n_dims, dims and type of one tensor-table entry and derives its sizes.
absl::Status parse_tensor_shape(Cursor* cursor, GgufTensorInfo* t) {
  ASSIGN_OR_RETURN(uint64_t num_dims, cursor->read_uint(4, absl::StrCat("n_dims of tensor '", t->name, "'")));
  if (num_dims > kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", t->name, "' has ", num_dims,
                                                   " dimensions (at most ", kMaxDims, " supported)"));
  }
  int64_t num_elements = 1;
  for (uint64_t i = 0; i < num_dims; ++i) {
    ASSIGN_OR_RETURN(uint64_t dim, cursor->read_uint(8, absl::StrCat("dims of tensor '", t->name, "'")));
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (num_elements != 0 && static_cast<int64_t>(dim) > std::numeric_limits<int64_t>::max() / num_elements)) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", t->name, "' dimension ", i, " (", dim,
                                                     ") makes the element count overflow int64"));
    }
    t->dims.push_back(static_cast<int64_t>(dim));
    num_elements *= static_cast<int64_t>(dim);
  }
  t->num_elements = num_elements;
  ASSIGN_OR_RETURN(uint64_t raw_type, cursor->read_uint(4, absl::StrCat("type of tensor '", t->name, "'")));
  t->type = static_cast<GgmlType>(raw_type);
  const GgmlTypeTraits traits = ggml_type_traits(t->type);
  if (traits.block_size == 0) {
    return absl::UnimplementedError(absl::StrCat("gguf: tensor '", t->name, "' has unknown ggml type ", raw_type));
  }
  if (t->row_length() % traits.block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", t->name, "' row length ", t->row_length(),
                                                   " is not a multiple of the ", ggml_type_name(t->type),
                                                   " block size ", traits.block_size));
  }
  const uint64_t num_blocks = static_cast<uint64_t>(num_elements / traits.block_size);
  const uint64_t block_bytes = static_cast<uint64_t>(traits.block_bytes);
  if (num_blocks > std::numeric_limits<uint64_t>::max() / block_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", t->name, "' byte size overflows"));
  }
  t->num_bytes = num_blocks * block_bytes;
  return absl::OkStatus();
}

}  // namespace

absl::Status GgufFile::parse() {
  Cursor cursor(base_, size_);
  uint64_t num_tensors = 0, num_kv = 0;
  RETURN_IF_ERROR(parse_header(&cursor, &version_, &num_tensors, &num_kv));

  MetadataParser values(&cursor);
  std::unordered_set<std::string_view> keys;
  metadata_.reserve(num_kv);
  for (uint64_t i = 0; i < num_kv; ++i) {
    std::pair<std::string, GgufValue>& kv = metadata_.emplace_back();
    RETURN_IF_ERROR(cursor.read_string(absl::StrCat("key of metadata entry ", i), &kv.first));
    ASSIGN_OR_RETURN(uint64_t raw_type, cursor.read_uint(4, absl::StrCat("value type of '", kv.first, "'")));
    if (!is_known_value_type(static_cast<uint32_t>(raw_type))) {
      return absl::DataLossError(absl::StrCat("gguf: metadata '", kv.first, "' has unknown value type ", raw_type));
    }
    RETURN_IF_ERROR(values.parse_value(static_cast<GgufValueType>(raw_type), 0, kv.first, &kv.second));
  }
  // Keys are checked after parsing: metadata_ no longer reallocates, so views stay valid.
  for (const auto& [key, value] : metadata_) {
    if (!keys.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: duplicate metadata key '", key, "'"));
    }
  }
  if (const GgufValue* value = find("general.alignment"); value != nullptr) {
    if (!value->is_unsigned() && !value->is_signed()) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: general.alignment has type ",
                                                     gguf_value_type_name(value->type), ", expected uint32"));
    }
    const int64_t a = value->is_signed() ? value->int_value : static_cast<int64_t>(value->uint_value);
    if (a <= 0 || (a & (a - 1)) != 0 || (value->is_unsigned() && value->uint_value > (uint64_t{1} << 62))) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: general.alignment ",
                                                     value->is_signed() ? absl::StrCat(value->int_value)
                                                                        : absl::StrCat(value->uint_value),
                                                     " is not a non-zero power of two"));
    }
    alignment_ = static_cast<uint64_t>(a);
  } else {
    alignment_ = kDefaultAlignment;
  }

  tensors_.reserve(num_tensors);
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < num_tensors; ++i) {
    GgufTensorInfo& t = tensors_.emplace_back();
    RETURN_IF_ERROR(cursor.read_string(absl::StrCat("name of tensor ", i), &t.name));
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: duplicate tensor name '", t.name, "'"));
    }
    RETURN_IF_ERROR(parse_tensor_shape(&cursor, &t));
    ASSIGN_OR_RETURN(uint64_t offset, cursor.read_uint(8, absl::StrCat("offset of tensor '", t.name, "'")));
    if (offset % alignment_ != 0) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: tensor '", t.name, "' offset ", offset,
                                                     " is not a multiple of the alignment ", alignment_));
    }
    t.offset = offset;
  }
  return place_tensors(cursor.pos());
}

absl::Status GgufFile::place_tensors(uint64_t end_of_table) {
  if (!align_up(end_of_table, alignment_, &data_offset_)) {
    return absl::InvalidArgumentError(absl::StrCat("gguf: data section offset overflows (alignment ", alignment_, ")"));
  }
  if (tensors_.empty()) return absl::OkStatus();  // padding may be absent
  if (data_offset_ > size_) {
    return absl::DataLossError(absl::StrCat("gguf: data section starts at ", data_offset_,
                                            " past the end of the file (", size_, " bytes)"));
  }
  const uint64_t data_size = size_ - data_offset_;
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset > data_size || t.num_bytes > data_size - t.offset) {
      return absl::DataLossError(absl::StrCat("gguf: tensor '", t.name, "' data (", t.num_bytes,
                                              " bytes at data offset ", t.offset,
                                              ") lies past the end of the data section (", data_size,
                                              " bytes)"));
    }
    t.data = base_ + data_offset_ + t.offset;
  }
  return absl::OkStatus();
}

}  // namespace flashserve::model
