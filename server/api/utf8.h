#pragma once
// UTF-8 hygiene for proto3 `string` fields, which must hold valid UTF-8 (other languages'
// protobuf runtimes refuse to parse anything else).
#include <string>

#include "absl/strings/string_view.h"

namespace flashserve::api {

// True if `text` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
bool is_valid_utf8(absl::string_view text);
// `text` with every byte that is not part of a well-formed sequence replaced by U+FFFD.
std::string replace_invalid_utf8(absl::string_view text);
// `text` with every such byte written as the escape "\xAB" (for token pieces, which are
// often single bytes of a multi-byte character).
std::string escape_invalid_utf8(absl::string_view text);

}  // namespace flashserve::api
