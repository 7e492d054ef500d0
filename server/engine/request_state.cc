#include "server/engine/request_state.h"

#include <utility>

namespace flashserve::engine {
namespace {

double seconds_between(Clock::TimePoint from, Clock::TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

RequestState::RequestState(RequestId id, GenerationRequest request, EventSink event_sink,
                           const model::Tokenizer& tokenizer, uint64_t fallback_seed,
                           TimePoint now)
    : seq(id, std::move(request.prompt_tokens), now),
      sampler(request.sampling, fallback_seed, request.logprobs),
      output(tokenizer,
             StopConditions{request.max_new_tokens, std::move(request.stop_strings),
                            std::move(request.stop_token_ids), request.ignore_eos}),
      sink(std::make_shared<EventSink>(std::move(event_sink))),
      deadline(request.deadline),
      want_logprobs(request.logprobs || request.sampling.num_logprobs > 0),
      max_new_tokens(request.max_new_tokens),
      api(request.api) {}

StopReason RequestState::take_token(const model::SampledToken& token, TimePoint now) {
  if (!first_token_time) first_token_time = now;
  last_token_time = now;
  pending.token_ids.push_back(token.token);
  if (want_logprobs) pending.logprobs.push_back({token.token, token.logprob, token.top_logprobs});
  OutputProcessor::Output o = output.append(token.token);
  pending.text += o.text;
  return o.stop;
}

GenerationEvent RequestState::final_event(FinishReason reason, absl::Status status,
                                          TimePoint now) {
  GenerationEvent event = std::move(pending);
  pending = GenerationEvent();
  if (reason == FinishReason::kCancelled || reason == FinishReason::kDeadlineExceeded ||
      reason == FinishReason::kError) {
    event.text += output.flush();  // held-back text that never became a stop string
  }
  event.finished = true;
  event.finish_reason = reason;
  event.status = std::move(status);
  event.usage = {seq.num_prompt_tokens(), seq.num_known_generated_tokens()};
  event.timings.queue_seconds = seconds_between(
      seq.arrival_time(), seq.was_scheduled() ? seq.first_scheduled_time() : now);
  event.timings.time_to_first_token =
      first_token_time ? seconds_between(seq.arrival_time(), *first_token_time) : 0;
  event.timings.total_seconds = seconds_between(seq.arrival_time(), now);
  return event;
}

}  // namespace flashserve::engine
