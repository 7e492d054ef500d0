#pragma once
// Request validation: everything the gRPC layer checks before a request reaches the engine.
// Every error is InvalidArgument and its message names the field (in proto path syntax, e.g.
// "sampling.top_p", "chat.messages[2].role", "stopping.stop[0]") and the offending value.
//
// Two stages:
//   1. validate_generate_request(): the request alone against the limits (no model needed).
//   2. build_generation_request() (prompt.h): renders/tokenizes the input with the model's
//      tokenizer and chat template and fills an engine::GenerationRequest, checking what
//      needs the token count (prompt + max_new_tokens within the context).
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "flashserve/v1/generation.pb.h"
#include "model/sampling.h"

namespace flashserve::api {

// Bounds on what one request may ask for. The model-dependent ones (context, vocab) come from
// the loaded model; the rest are server policy, reported by GetModelInfo.limits.
struct RequestLimits {
  int context_length = 0;            // tokens per sequence (prompt + generated)
  int vocab_size = 0;                // token ids must be in [0, vocab_size)
  int max_new_tokens = 4096;         // cap on stopping.max_new_tokens
  int default_max_new_tokens = 256;  // when stopping.max_new_tokens is unset (then clamped)
  int max_stop_strings = 16;
  int max_stop_string_length = 256;  // bytes
  int max_stop_token_ids = 64;
  // What the sampling kernels can report (kernels::kMaxTopLogprobs, through model/sampling.h);
  // a server may lower it, never raise it.
  int max_top_logprobs = model::kMaxLogprobs;
  int max_chat_messages = 1024;
  int max_input_bytes = 1 << 20;     // prompt text / all chat contents together
};

// Ranges accepted for sampling parameters (documented in generation.proto): the model's
// constants. model::validate() enforces them in the engine for every caller; the api checks
// them first only to name the request field in the error (CONTRIBUTING.md "Errors").
using model::kMaxAbsPenalty;
using model::kMaxRepetitionPenalty;
using model::kMaxTemperature;

// Stage 1. OK or InvalidArgument naming the field.
absl::Status validate_generate_request(const v1::GenerateRequest& request,
                                       const RequestLimits& limits);
// The parts shared with Tokenize.
absl::Status validate_chat(const v1::ChatInput& chat, const RequestLimits& limits);
absl::Status validate_sampling(const v1::SamplingParams& sampling, const RequestLimits& limits);
absl::Status validate_stopping(const v1::StoppingCriteria& stopping, const RequestLimits& limits);
// Every id in [0, vocab_size); `field` names the repeated field for the message.
absl::Status validate_token_ids(const google::protobuf::RepeatedField<int32_t>& ids,
                                int vocab_size, absl::string_view field);

// True for the chat roles we accept: "system", "user", "assistant".
bool is_known_role(absl::string_view role);

}  // namespace flashserve::api
