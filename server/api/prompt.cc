#include "server/api/prompt.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace flashserve::api {

absl::StatusOr<std::string> render_chat(const v1::ChatInput& chat, const PromptContext& ctx) {
  if (ctx.chat_template == nullptr) {
    return absl::FailedPreconditionError(
        "chat: the model has no chat template flashserve can render; send a prompt instead");
  }
  std::vector<model::ChatMessage> messages;
  messages.reserve(chat.messages_size());
  for (const v1::ChatMessage& m : chat.messages()) messages.push_back({m.role(), m.content()});
  auto rendered = ctx.chat_template->render(messages, /*add_generation_prompt=*/true);
  if (!rendered.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("chat: ", rendered.status().message()));
  }
  return rendered;
}

absl::StatusOr<std::vector<int32_t>> prompt_tokens(const v1::GenerateRequest& request,
                                                   const PromptContext& ctx) {
  switch (request.input_case()) {
    case v1::GenerateRequest::kPrompt:
      return ctx.tokenizer->encode(request.prompt(), /*add_special=*/true,
                                   /*parse_special=*/false);
    case v1::GenerateRequest::kChat: {
      ASSIGN_OR_RETURN(const std::string text, render_chat(request.chat(), ctx));
      return ctx.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/true);
    }
    case v1::GenerateRequest::kTokenIds:
      return std::vector<int32_t>(request.token_ids().ids().begin(),
                                  request.token_ids().ids().end());
    case v1::GenerateRequest::INPUT_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("input: one of prompt, chat or token_ids is required");
}

model::SamplingParams to_sampling_params(const v1::GenerateRequest& request) {
  const v1::SamplingParams& s = request.sampling();
  model::SamplingParams p;
  // The proto's documented defaults (OpenAI-like: temperature 1), not the model's.
  p.temperature = s.has_temperature() ? s.temperature() : 1.0f;
  p.top_k = s.top_k();
  p.top_p = s.has_top_p() ? s.top_p() : 1.0f;
  p.min_p = s.min_p();
  p.repetition_penalty = s.has_repetition_penalty() ? s.repetition_penalty() : 1.0f;
  p.presence_penalty = s.presence_penalty();
  p.frequency_penalty = s.frequency_penalty();
  p.has_seed = s.has_seed();  // unset: the engine seeds the sequence itself
  p.seed = s.seed();
  p.num_logprobs = request.logprobs() ? request.top_logprobs() : 0;
  return p;
}

absl::StatusOr<engine::GenerationRequest> build_generation_request(
    const v1::GenerateRequest& request, const PromptContext& ctx,
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens, prompt_tokens(request, ctx));
  const int context = ctx.limits.context_length;
  const int num_prompt = static_cast<int>(tokens.size());
  const std::string input_field = request.has_chat()        ? "chat"
                                  : request.has_token_ids() ? "token_ids.ids"
                                                            : "prompt";
  if (num_prompt == 0) {
    return absl::InvalidArgumentError(absl::StrCat(input_field, ": tokenizes to no tokens"));
  }
  if (num_prompt >= context) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d prompt tokens leave no room in the context length %d", input_field,
        num_prompt, context));
  }
  engine::GenerationRequest out;
  const v1::StoppingCriteria& stopping = request.stopping();
  if (stopping.has_max_new_tokens()) {
    if (num_prompt + stopping.max_new_tokens() > context) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "stopping.max_new_tokens: %d prompt tokens + max_new_tokens %d exceed the context "
          "length %d",
          num_prompt, stopping.max_new_tokens(), context));
    }
    out.max_new_tokens = stopping.max_new_tokens();
  } else {
    out.max_new_tokens = std::min(ctx.limits.default_max_new_tokens, context - num_prompt);
  }
  out.prompt_tokens = std::move(tokens);
  out.sampling = to_sampling_params(request);
  out.stop_strings.assign(stopping.stop().begin(), stopping.stop().end());
  out.stop_token_ids.assign(stopping.stop_token_ids().begin(), stopping.stop_token_ids().end());
  out.ignore_eos = stopping.ignore_eos();
  out.logprobs = request.logprobs();
  out.deadline = deadline;
  return out;
}

}  // namespace flashserve::api
