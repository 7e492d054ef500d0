#pragma once
// Stage 2 of request handling (stage 1 is validation.h): turns a validated request's input
// into prompt token ids with the model's tokenizer and chat template, and fills the engine's
// GenerationRequest. Errors are InvalidArgument naming the field, like stage 1.
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "flashserve/v1/generation.pb.h"
#include "model/text/chat_template.h"
#include "model/text/tokenizer.h"
#include "server/api/validation.h"
#include "server/engine/engine.h"

namespace flashserve::api {

// What stage 2 needs from the loaded model. The pointers must outlive the calls.
struct PromptContext {
  const model::Tokenizer* tokenizer = nullptr;
  const model::ChatTemplate* chat_template = nullptr;  // null: the model has none usable
  RequestLimits limits;
};

// Chat messages -> the prompt text the model's template renders (with the assistant header).
// FailedPrecondition when the model has no chat template we can render.
absl::StatusOr<std::string> render_chat(const v1::ChatInput& chat, const PromptContext& ctx);

// The prompt's token ids: text as generation tokenizes it (add_special = true: BOS if the
// model wants it; special-token text not parsed), chat rendered then tokenized with special
// tokens parsed, token ids as given. REQUIRES: validate_generate_request() passed.
absl::StatusOr<std::vector<int32_t>> prompt_tokens(const v1::GenerateRequest& request,
                                                   const PromptContext& ctx);

// Proto sampling parameters -> the model's, unset fields at the documented defaults; an
// unset seed leaves the choice to the engine (a per-request seed).
model::SamplingParams to_sampling_params(const v1::GenerateRequest& request);

// The whole of stage 2. `deadline` is the call's deadline, if any. Checks that the prompt
// plus max_new_tokens fit in the context (an unset max_new_tokens is clamped to what fits).
absl::StatusOr<engine::GenerationRequest> build_generation_request(
    const v1::GenerateRequest& request, const PromptContext& ctx,
    std::optional<std::chrono::steady_clock::time_point> deadline);

}  // namespace flashserve::api
