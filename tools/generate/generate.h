#pragma once
// One request through the engine, in-process (no server): what flashserve-generate runs.
// The same scheduler, sampling, detokenizing and stop rules as the server, on one sequence.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/runner.h"
#include "model/sampling.h"
#include "model/text/tokenizer.h"
#include "server/engine/engine.h"

namespace flashserve::tools {

struct GenerateOptions {
  std::vector<int32_t> prompt_tokens;  // not empty
  int max_new_tokens = 64;             // >= 1; prompt + max_new_tokens must fit the context
  model::SamplingParams sampling;
};

struct GenerateResult {
  std::vector<int32_t> token_ids;  // generated, including a final end-of-generation token
  std::string text;                // everything passed to on_text, in order
  engine::FinishReason finish_reason = engine::FinishReason::kStop;
  engine::Timings timings;
};

// Runs the request on an engine that owns `runner`; `on_text` receives each piece of text as
// it is produced (on the engine thread). Errors: the engine's submit() errors (invalid
// request, does not fit the KV cache) and a failed forward pass, each with its message.
absl::StatusOr<GenerateResult> generate(std::unique_ptr<model::ModelRunner> runner,
                                        const model::Tokenizer& tokenizer,
                                        const GenerateOptions& options,
                                        std::function<void(std::string_view)> on_text);

}  // namespace flashserve::tools
