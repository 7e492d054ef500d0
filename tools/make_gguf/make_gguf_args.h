#pragma once
// Command-line flags of flashserve-make-gguf (see kMakeGgufUsage / --help).
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/make_gguf/random_llama.h"

namespace flashserve::tools {

struct MakeGgufArgs {
  bool help = false;  // --help / -h: print the usage and exit 0
  RandomLlamaOptions options;
};

// The text --help prints.
std::string make_gguf_usage();

// Parses argv[1..] (without the program name). The shape starts from --preset (default
// smollm2-135m) whatever the flag order, then each override applies. InvalidArgument naming
// the flag for: unknown flags, a flag without its value, malformed or out-of-range values,
// an unknown --preset or --type, a missing --tokenizer-from or --out, and shapes that
// validate_shape rejects.
absl::StatusOr<MakeGgufArgs> parse_make_gguf_args(const std::vector<std::string>& args);

}  // namespace flashserve::tools
