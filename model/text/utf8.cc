#include "model/text/utf8.h"

#include "absl/strings/str_format.h"

namespace flashserve::model {
namespace {

// Allowed range of the second byte after `lead` (Unicode Table 3-7).
void second_byte_range(unsigned char lead, unsigned char& lo, unsigned char& hi) {
  lo = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
  hi = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
}

// Number of bytes at text[pos..] (at most the announced length) that are consistent with a
// well-formed sequence; 0 if the lead byte is already invalid.
size_t consistent_prefix_length(std::string_view text, size_t pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) return 1;
  if (b0 < 0xC2 || b0 > 0xF4) return 0;
  const size_t len = utf8_sequence_length(b0);
  unsigned char lo, hi;
  second_byte_range(b0, lo, hi);
  size_t i = 1;
  for (; i < len && pos + i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[pos + i]);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : (b & 0xC0) == 0x80;
    if (!ok) break;
  }
  return i;
}

}  // namespace

int utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

size_t valid_utf8_sequence_length(std::string_view text, size_t pos) {
  const size_t len = utf8_sequence_length(static_cast<unsigned char>(text[pos]));
  return consistent_prefix_length(text, pos) == len && pos + len <= text.size() ? len : 0;
}

bool is_incomplete_utf8_sequence(std::string_view text, size_t pos) {
  const size_t len = utf8_sequence_length(static_cast<unsigned char>(text[pos]));
  return pos + len > text.size() && consistent_prefix_length(text, pos) == text.size() - pos;
}

namespace {

// `text` with each byte that does not begin a well-formed sequence passed to `replace`.
template <typename Replace>
std::string rewrite_invalid(std::string_view text, Replace replace) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = valid_utf8_sequence_length(text, pos);
    if (len == 0) {
      replace(static_cast<unsigned char>(text[pos]), &out);
      ++pos;
    } else {
      out.append(text.substr(pos, len));
      pos += len;
    }
  }
  return out;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = valid_utf8_sequence_length(text, pos);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

std::string sanitize_utf8(std::string_view text) {
  return rewrite_invalid(text, [](unsigned char, std::string* out) {
    out->append(kReplacementCharacter);
  });
}

std::string escape_invalid_utf8(std::string_view text) {
  return rewrite_invalid(text, [](unsigned char b, std::string* out) {
    out->append(absl::StrFormat("\\x%02X", b));
  });
}

std::string codepoint_to_utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

namespace {

// Python's str.isspace() code points, as UTF-8 (Jinja's trim filter is str.strip()).
constexpr std::string_view kUnicodeSpaces[] = {
    "\xC2\x85",     "\xC2\xA0",     "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81",
    "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86",
    "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89", "\xE2\x80\x8A", "\xE2\x80\xA8",
    "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};

// Length of the whitespace character at the start (or end) of `s`, 0 if none.
size_t space_prefix(std::string_view s) {
  if (s.empty()) return 0;
  const unsigned char c = s[0];
  if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F)) return 1;
  for (std::string_view sp : kUnicodeSpaces) {
    if (s.starts_with(sp)) return sp.size();
  }
  return 0;
}

size_t space_suffix(std::string_view s) {
  if (s.empty()) return 0;
  const unsigned char c = s.back();
  if (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F)) return 1;
  for (std::string_view sp : kUnicodeSpaces) {
    if (s.ends_with(sp)) return sp.size();
  }
  return 0;
}

}  // namespace

// Python's str.strip(): Unicode whitespace at both ends.
std::string python_strip(std::string_view s) {
  for (size_t n; (n = space_prefix(s)) > 0;) s.remove_prefix(n);
  for (size_t n; (n = space_suffix(s)) > 0;) s.remove_suffix(n);
  return std::string(s);
}


}  // namespace flashserve::model
