#include "server/api/utf8.h"

#include "absl/strings/str_format.h"

namespace flashserve::api {
namespace {

// Length of the well-formed sequence starting at text[i] (1-4), or 0 if the byte there does
// not start one (RFC 3629, Table 3-7 of the Unicode standard).
size_t valid_sequence_length(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;  // no overlongs
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  if (i + len > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

template <typename Replace>
std::string rewrite_invalid(absl::string_view text, Replace replace) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t len = valid_sequence_length(text, i);
    if (len == 0) {
      replace(static_cast<unsigned char>(text[i]), &out);
      ++i;
    } else {
      out.append(text.data() + i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace

bool is_valid_utf8(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t len = valid_sequence_length(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string replace_invalid_utf8(absl::string_view text) {
  return rewrite_invalid(text, [](unsigned char, std::string* out) { out->append("\xEF\xBF\xBD"); });
}

std::string escape_invalid_utf8(absl::string_view text) {
  return rewrite_invalid(text, [](unsigned char b, std::string* out) {
    out->append(absl::StrFormat("\\x%02X", b));
  });
}

}  // namespace flashserve::api
