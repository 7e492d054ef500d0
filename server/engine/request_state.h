#pragma once
// One accepted request inside the engine: its sequence for the scheduler and everything that
// turns its sampled tokens into events — the sampler (next sample spec), the output processor
// (detokenizing, stop checks), the event being built since the last one, and the times its
// timings come from.
//
// Thread-safety: none; the engine thread owns it (EventSink calls happen on the delivery
// thread through the shared `sink`).
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "model/sampling.h"
#include "model/text/tokenizer.h"
#include "server/engine/clock.h"
#include "server/engine/engine.h"
#include "server/engine/output_processor.h"
#include "server/engine/sequence.h"

namespace flashserve::engine {

struct RequestState {
  using TimePoint = Clock::TimePoint;

  // REQUIRES: the engine accepted `request` (Engine::submit's checks). The tokenizer must
  // outlive it.
  RequestState(RequestId id, GenerationRequest request, EventSink sink,
               const model::Tokenizer& tokenizer, uint64_t fallback_seed, TimePoint now);

  bool expired(TimePoint now) const { return deadline && now >= *deadline; }
  // The time of the previous sampled token; none before the first.
  std::optional<TimePoint> previous_token_time() const {
    return first_token_time ? std::optional(last_token_time) : std::nullopt;
  }

  // Takes a sampled token that the sequence already holds (the engine appends or resolves
  // it in `seq` first) into `pending` (id, logprob, text released by the output processor).
  // Returns why the request stops with it (kNone: it goes on).
  StopReason take_token(const model::SampledToken& token, TimePoint now);
  // The sequence holds max_new_tokens generated tokens (a pending one included): no more.
  bool reached_max_new_tokens() const { return seq.num_generated_tokens() >= max_new_tokens; }
  // The request's final event at `now`: what is pending (plus held-back text when it ends
  // early: cancel, deadline, error), `reason`, `status`, usage and timings. Leaves `pending`
  // empty.
  GenerationEvent final_event(FinishReason reason, absl::Status status, TimePoint now);

  Sequence seq;
  model::Sampler sampler;
  OutputProcessor output;
  std::shared_ptr<EventSink> sink;
  std::optional<TimePoint> deadline;
  bool want_logprobs;
  int max_new_tokens;
  metrics::Api api;  // the metrics label of its final status
  GenerationEvent pending;  // tokens and text since the last event
  std::optional<TimePoint> first_token_time;
  TimePoint last_token_time;
};

}  // namespace flashserve::engine
