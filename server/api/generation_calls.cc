#include "server/api/generation_calls.h"

#include <chrono>
#include <deque>
#include <mutex>
#include <optional>

#include "absl/strings/str_format.h"
#include "model/text/utf8.h"
#include "server/api/grpc_status.h"
#include "server/api/raw_messages.h"

namespace flashserve::api {

// State shared by a call's reactor and its engine sink; see generation_calls.h. gRPC
// operations (StartWrite, Finish) are issued after releasing `mu`, by the one thread that
// changed `writing`/`finished` under it, so the reactor is touched by one thread at a time
// and never after `finished`.
struct CallState {
  CallState(engine::Engine* e, const Logger* l, std::string_view m)
      : engine(e), logger(l), method(m) {}

  std::mutex mu;
  engine::Engine* const engine;
  const Logger* const logger;  // may be null
  const std::string_view method;
  // Exactly one of these is set; valid until `finished`.
  GenerateCall* unary = nullptr;
  v1::GenerateResponse response;              // unary: gathered events
  grpc::ByteBuffer* response_bytes = nullptr;  // unary: gRPC's, serialized before Finish
  GenerateStreamCall* stream = nullptr;
  std::deque<engine::GenerationEvent> pending;  // stream: events not yet written
  v1::GenerateStreamResponse out;               // stream: the message being written
  grpc::ByteBuffer out_bytes;                   // stream: `out` serialized
  bool writing = false;      // stream: a StartWrite is in flight
  bool finished = false;     // Finish (or StartWriteAndFinish) has been issued
  bool client_gone = false;  // OnCancel, or a write failed
  bool submitted = false;
  engine::RequestId id = 0;
  // The call's deadline (unset: none), to tell a deadline from a client's cancel: gRPC
  // cancels the call (OnCancel) in both cases.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // From the final event, for the access line; stable once `finished`.
  bool have_final = false;
  engine::FinishReason finish_reason = engine::FinishReason::kStop;
  engine::Usage usage;
  engine::Timings timings;

  void on_event(engine::GenerationEvent event);
  // Streaming: writes what is pending, if no write is in flight. Consumes the lock.
  void pump(std::unique_lock<std::mutex> lock);
  // Finishes the call at once (rejected before or by submit()). Consumes the lock.
  void finish(std::unique_lock<std::mutex> lock, const grpc::Status& status);
  // The access line. REQUIRES: `finished` (so the fields it reads no longer change).
  void log_access(const grpc::Status& status) const;
  // The status of a call the client side ended (client_gone): DEADLINE_EXCEEDED once the
  // deadline has passed, else CANCELLED by the client.
  grpc::Status gone_status() const;
};

namespace {

const grpc::Status& cancelled_by_client() {
  static const grpc::Status* status =
      new grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
  return *status;
}

void append_logprobs(const std::vector<engine::TokenLogprob>& logprobs,
                     google::protobuf::RepeatedPtrField<v1::TokenLogprob>* out) {
  for (const engine::TokenLogprob& lp : logprobs) {
    v1::TokenLogprob* p = out->Add();
    p->set_token_id(lp.token);
    p->set_logprob(lp.logprob);
    for (const auto& [token, logprob] : lp.top) {
      v1::TopLogprob* top = p->add_top();
      top->set_token_id(token);
      top->set_logprob(logprob);
    }
  }
}

template <typename Response>
void append_event_impl(const engine::GenerationEvent& event, Response* response) {
  // The engine emits only complete UTF-8; checking is cheap insurance for the proto field.
  if (model::is_valid_utf8(event.text)) {
    response->mutable_text()->append(event.text);
  } else {
    response->mutable_text()->append(model::sanitize_utf8(event.text));
  }
  response->mutable_token_ids()->Add(event.token_ids.begin(), event.token_ids.end());
  append_logprobs(event.logprobs, response->mutable_logprobs());
}

// Runs the engine submission shared by both calls. Touches only `state` after submit()
// returns: the reactor may already be gone.
void submit_request(const std::shared_ptr<CallState>& state, engine::GenerationRequest request) {
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->deadline = request.deadline;
  }
  auto id = state->engine->submit(
      std::move(request),
      [state](engine::GenerationEvent event) { state->on_event(std::move(event)); });
  std::unique_lock<std::mutex> lock(state->mu);
  if (!id.ok()) {
    state->finish(std::move(lock), to_grpc_status(id.status()));
    return;
  }
  state->submitted = true;
  state->id = *id;
  const bool cancel_now = state->client_gone;
  lock.unlock();
  if (cancel_now) state->engine->cancel(*id);
}

// OnCancel of either call: remember it and abort the sequence.
void on_client_cancel(const std::shared_ptr<CallState>& state) {
  std::unique_lock<std::mutex> lock(state->mu);
  state->client_gone = true;
  const bool cancel = state->submitted && !state->finished;
  const engine::RequestId id = state->id;
  if (state->stream != nullptr) {
    state->pump(std::move(lock));  // drops unwritten events; finishes if the final is here
  } else {
    lock.unlock();
  }
  if (cancel) state->engine->cancel(id);
}

}  // namespace

v1::FinishReason to_proto(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case engine::FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case engine::FinishReason::kStopSequence: return v1::FINISH_REASON_STOP_SEQUENCE;
    case engine::FinishReason::kCancelled: return v1::FINISH_REASON_CANCELLED;
    case engine::FinishReason::kDeadlineExceeded: return v1::FINISH_REASON_DEADLINE_EXCEEDED;
    case engine::FinishReason::kError: return v1::FINISH_REASON_ERROR;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

grpc::Status final_status(const engine::GenerationEvent& event, bool client_cancelled) {
  switch (event.finish_reason) {
    case engine::FinishReason::kStop:
    case engine::FinishReason::kLength:
    case engine::FinishReason::kStopSequence:
      return grpc::Status::OK;
    case engine::FinishReason::kCancelled:
      return client_cancelled ? cancelled_by_client()
                              : grpc::Status(grpc::StatusCode::CANCELLED,
                                             "cancelled by the server (shutting down)");
    case engine::FinishReason::kDeadlineExceeded:
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          absl::StrFormat("deadline exceeded after %d generated tokens",
                                          event.usage.completion_tokens));
    case engine::FinishReason::kError:
      break;
  }
  if (event.status.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "generation failed");
  return to_grpc_status(event.status);
}

void append_event(const engine::GenerationEvent& event, v1::GenerateResponse* response) {
  append_event_impl(event, response);
}
void append_event(const engine::GenerationEvent& event, v1::GenerateStreamResponse* response) {
  append_event_impl(event, response);
}

void fill_usage(const engine::GenerationEvent& event, v1::Usage* usage, v1::Timings* timings) {
  usage->set_prompt_tokens(event.usage.prompt_tokens);
  usage->set_completion_tokens(event.usage.completion_tokens);
  usage->set_total_tokens(event.usage.prompt_tokens + event.usage.completion_tokens);
  timings->set_queue_seconds(event.timings.queue_seconds);
  timings->set_time_to_first_token_seconds(event.timings.time_to_first_token);
  timings->set_total_seconds(event.timings.total_seconds);
}

// ---- CallState ------------------------------------------------------------------------------

void CallState::finish(std::unique_lock<std::mutex> lock, const grpc::Status& status) {
  if (finished) return;
  finished = true;
  lock.unlock();
  log_access(status);
  if (unary != nullptr) {
    unary->Finish(status);
  } else {
    stream->Finish(status);
  }
}

grpc::Status CallState::gone_status() const {
  // The client's deadline timer fires first and its RST_STREAM can reach us a little before
  // our own copy of the deadline (gRPC sends a relative timeout; ours starts at receipt).
  constexpr auto kDeadlineSlack = std::chrono::milliseconds(50);
  if (deadline.has_value() && std::chrono::steady_clock::now() + kDeadlineSlack >= *deadline) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        absl::StrFormat("deadline exceeded after %d generated tokens",
                                        usage.completion_tokens));
  }
  return cancelled_by_client();
}

void CallState::log_access(const grpc::Status& status) const {
  if (logger == nullptr) return;
  const std::string code =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
  const LogLevel level = status.error_code() == grpc::StatusCode::INTERNAL ? LogLevel::kError
                                                                           : LogLevel::kInfo;
  logger->log(level, "access",
              {{"method", method},
               {"request_id", static_cast<int64_t>(id)},
               {"status", std::string_view(code)},
               {"finish_reason",
                have_final ? engine::finish_reason_name(finish_reason) : "rejected"},
               {"prompt_tokens", static_cast<int64_t>(usage.prompt_tokens)},
               {"completion_tokens", static_cast<int64_t>(usage.completion_tokens)},
               {"queue_seconds", timings.queue_seconds},
               {"ttft_seconds", timings.time_to_first_token},
               {"total_seconds", timings.total_seconds},
               {"error", std::string_view(status.error_message())}});
}

void CallState::on_event(engine::GenerationEvent event) {
  std::unique_lock<std::mutex> lock(mu);
  if (finished) return;  // cannot happen (final event once, after submit); kept defensive
  if (event.finished) {
    have_final = true;
    finish_reason = event.finish_reason;
    usage = event.usage;
    timings = event.timings;
  }
  if (stream != nullptr) {
    pending.push_back(std::move(event));
    pump(std::move(lock));
    return;
  }
  append_event(event, &response);
  if (!event.finished) return;
  const grpc::Status status =
      client_gone && event.finish_reason == engine::FinishReason::kCancelled
          ? gone_status()
          : final_status(event, client_gone);
  if (status.ok()) {
    response.set_finish_reason(to_proto(event.finish_reason));
    fill_usage(event, response.mutable_usage(), response.mutable_timings());
    *response_bytes = to_byte_buffer(response);
  }
  finish(std::move(lock), status);
}

void CallState::pump(std::unique_lock<std::mutex> lock) {
  if (finished || writing) return;
  if (client_gone) {
    // Nothing more is written; finish once the engine's final event is here.
    bool have_final = false;
    for (const engine::GenerationEvent& e : pending) have_final |= e.finished;
    pending.clear();
    if (have_final) finish(std::move(lock), gone_status());
    return;
  }
  out.Clear();
  const engine::GenerationEvent* final_event = nullptr;
  std::deque<engine::GenerationEvent> taken;
  while (!pending.empty() && final_event == nullptr) {
    taken.push_back(std::move(pending.front()));
    pending.pop_front();
    append_event(taken.back(), &out);
    if (taken.back().finished) final_event = &taken.back();
  }
  if (final_event != nullptr) {
    const grpc::Status status = final_status(*final_event, /*client_cancelled=*/false);
    if (!status.ok()) {
      finish(std::move(lock), status);
      return;
    }
    v1::GenerationFinal* f = out.mutable_final();
    f->set_finish_reason(to_proto(final_event->finish_reason));
    fill_usage(*final_event, f->mutable_usage(), f->mutable_timings());
    finished = true;
    out_bytes = to_byte_buffer(out);
    lock.unlock();
    log_access(grpc::Status::OK);
    stream->StartWriteAndFinish(&out_bytes, grpc::WriteOptions(), grpc::Status::OK);
    return;
  }
  if (out.text().empty() && out.token_ids().empty()) return;  // nothing visible to send
  writing = true;
  out_bytes = to_byte_buffer(out);
  lock.unlock();
  stream->StartWrite(&out_bytes);
}

// ---- GenerateCall ---------------------------------------------------------------------------

GenerateCall::GenerateCall(engine::Engine* engine, grpc::ByteBuffer* response,
                           const Logger* logger)
    : state_(std::make_shared<CallState>(engine, logger, "Generate")) {
  state_->unary = this;
  state_->response_bytes = response;
}

void GenerateCall::submit(engine::GenerationRequest request) {
  submit_request(std::shared_ptr<CallState>(state_), std::move(request));
}

void GenerateCall::reject(const grpc::Status& status) {
  state_->finish(std::unique_lock<std::mutex>(state_->mu), status);
}

void GenerateCall::OnCancel() { on_client_cancel(state_); }

void GenerateCall::OnDone() { delete this; }

// ---- GenerateStreamCall ---------------------------------------------------------------------

GenerateStreamCall::GenerateStreamCall(engine::Engine* engine, const Logger* logger)
    : state_(std::make_shared<CallState>(engine, logger, "GenerateStream")) {
  state_->stream = this;
}

void GenerateStreamCall::submit(engine::GenerationRequest request) {
  submit_request(std::shared_ptr<CallState>(state_), std::move(request));
}

void GenerateStreamCall::reject(const grpc::Status& status) {
  state_->finish(std::unique_lock<std::mutex>(state_->mu), status);
}

void GenerateStreamCall::OnWriteDone(bool ok) {
  std::shared_ptr<CallState> state = state_;
  std::unique_lock<std::mutex> lock(state->mu);
  state->writing = false;
  bool cancel = false;
  if (!ok && !state->client_gone) {
    state->client_gone = true;
    cancel = state->submitted && !state->finished;
  }
  const engine::RequestId id = state->id;
  state->pump(std::move(lock));
  if (cancel) state->engine->cancel(id);
}

void GenerateStreamCall::OnCancel() { on_client_cancel(state_); }

void GenerateStreamCall::OnDone() { delete this; }

}  // namespace flashserve::api
