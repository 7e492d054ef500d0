#pragma once
// The one UTF-8 validator: used by the tokenizers, the incremental detokenizer, the engine
// (stop strings) and the API layer (proto3 `string` fields must hold valid UTF-8).
// "Well-formed" follows Unicode Table 3-7 (RFC 3629): no overlong forms, no surrogates,
// nothing above U+10FFFF.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

namespace flashserve::model {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// Length of the sequence that `lead` announces (1 for ASCII, continuation or invalid bytes).
int utf8_sequence_length(unsigned char lead);

// Length of the well-formed sequence at text[pos] (pos < text.size()), or 0 if there is none.
size_t valid_utf8_sequence_length(std::string_view text, size_t pos);

// True if text[pos..] is a proper prefix of some well-formed sequence, i.e. more bytes could
// still complete it.
bool is_incomplete_utf8_sequence(std::string_view text, size_t pos);

// True if all of `text` is well-formed.
bool is_valid_utf8(std::string_view text);

// `text` with every byte that does not begin a well-formed sequence replaced by U+FFFD.
std::string sanitize_utf8(std::string_view text);

// `text` with every such byte written as the escape "\xAB" (for token pieces, which are
// often single bytes of a multi-byte character).
std::string escape_invalid_utf8(std::string_view text);

// Debian's Abseil has its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0).
inline absl::string_view to_absl(std::string_view s) { return {s.data(), s.size()}; }

// UTF-8 encoding of a code point <= U+10FFFF.
std::string codepoint_to_utf8(uint32_t cp);

// Python's str.strip() (Jinja's trim filter): removes every character of str.isspace() --
// ASCII whitespace, U+001C..U+001F, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000 -- from both ends.
std::string python_strip(std::string_view s);

}  // namespace flashserve::model
