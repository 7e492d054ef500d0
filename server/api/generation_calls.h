#pragma once
// The two generation calls as gRPC callback reactors (no thread per request):
//
//   GenerateCall        unary: gathers the engine's events into one GenerateResponse.
//   GenerateStreamCall  server streaming: one message per event; while a write is in flight
//                       further events queue up and are merged into the next message, so a
//                       slow client never blocks the engine thread (flow control).
//
// Lifetime and threading. A call's state lives in a CallState shared (shared_ptr) by the
// reactor (gRPC threads) and the engine's event sink (engine thread); the reactor deletes
// itself in OnDone(). Finish() is called exactly once, only after the engine's final event
// (or at once when submit() is refused), so the engine never calls into a finished call.
// engine::Engine::cancel() is never called with the state's mutex held (the engine may hold
// its own lock while invoking sinks).
//
// Client cancellation (OnCancel, or a failed write) -> engine.cancel(id); the engine then
// sends the final event (kCancelled) at its next step and the call finishes with CANCELLED,
// or DEADLINE_EXCEEDED when it was the call's deadline that passed (gRPC cancels the call
// then too).
//
// With a logger, every call writes one access line when it finishes: method, request id,
// gRPC status, finish reason, tokens in and out, queue / first-token / total seconds; a call
// refused before the engine (no token, malformed bytes, still loading) too, through
// reject().
#include <memory>

#include "flashserve/v1/generation.grpc.pb.h"
#include "server/api/log.h"
#include "server/engine/engine.h"

namespace flashserve::api {

struct CallState;

class GenerateCall final : public grpc::ServerUnaryReactor {
 public:
  // `response` is gRPC's (the serialized GenerateResponse), valid until OnDone. `logger`
  // (may be null) must outlive the call.
  GenerateCall(engine::Engine* engine, grpc::ByteBuffer* response,
               const Logger* logger = nullptr);
  // Exactly one of submit()/reject() is called, right after construction.
  void submit(engine::GenerationRequest request);
  void reject(const grpc::Status& status);

  void OnCancel() override;
  void OnDone() override;

 private:
  std::shared_ptr<CallState> state_;
};

// Writes serialized GenerateStreamResponse messages (the service uses raw methods).
class GenerateStreamCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit GenerateStreamCall(engine::Engine* engine, const Logger* logger = nullptr);
  void submit(engine::GenerationRequest request);
  void reject(const grpc::Status& status);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  std::shared_ptr<CallState> state_;
};

// Shared by both calls and unit-testable.
v1::FinishReason to_proto(engine::FinishReason reason);
// The gRPC status a call ends with after its final event: OK for stop/length/stop sequence.
grpc::Status final_status(const engine::GenerationEvent& event, bool client_cancelled);
// Append the event's text, token ids and logprobs to a response.
void append_event(const engine::GenerationEvent& event, v1::GenerateResponse* response);
void append_event(const engine::GenerationEvent& event, v1::GenerateStreamResponse* response);
// Fills usage and timings from the final event.
void fill_usage(const engine::GenerationEvent& event, v1::Usage* usage, v1::Timings* timings);

}  // namespace flashserve::api
