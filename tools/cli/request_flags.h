#pragma once
// The generation flags shared by `generate`, `chat` and `load`, and how they fill a
// GenerateRequest. Unset flags leave the proto fields unset so the server defaults apply.
#include <chrono>
#include <optional>

#include "absl/status/status.h"
#include "flashserve/v1/generation.pb.h"
#include "tools/cli/args.h"

namespace flashserve::cli {

// Adds --max-tokens --temperature --top-k --top-p --min-p --repetition-penalty
// --presence-penalty --frequency-penalty --seed --stop (repeatable) --stop-token-id
// (repeatable) --ignore-eos --logprobs N --timeout SECONDS to `spec`.
void add_generation_flags(FlagSpec* spec);

// Fills request->sampling/stopping/logprobs from the flags. InvalidArgument for malformed
// numbers (range checks are the server's job: it names the field).
absl::Status apply_generation_flags(const Args& args, v1::GenerateRequest* request);

// --timeout SECONDS as a duration; unset when absent or 0.
absl::StatusOr<std::optional<std::chrono::milliseconds>> timeout_flag(const Args& args);

}  // namespace flashserve::cli
