#pragma once
// One generation request on one HTTP connection: the engine's event sink on one side, the
// libmicrohttpd connection on the other (http_server.h describes the threads).
//
//   stream = false  the connection is suspended until the final event; the access handler,
//                   called again after resume, answers with answer_status()/answer_body().
//   stream = true   the response is a server-sent-event stream whose reader (read()) copies
//                   what the events produced and suspends the connection while there is
//                   nothing; each event resumes it.
//
// Disconnects: a suspended connection is not watched by libmicrohttpd, so every event first
// checks whether the client has closed its side (poll POLLRDHUP on the socket) and cancels
// the request; the engine then ends it at its next step. Requests without events (waiting
// for admission) are checked by the server's watcher (check_disconnect()). connection_closed() (the request is
// over for libmicrohttpd: answered, or the client went away mid-stream) cancels a request
// still running.
//
// Locking: `mu_` guards the state; libmicrohttpd's suspend happens under it (on its own
// thread, from the reader or the access handler) and resume after it (on the delivery
// thread), so a resume always follows the suspend it answers. engine::Engine::cancel() is
// never called with `mu_` held (the engine may hold its lock while it invokes sinks).
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "server/engine/engine.h"
#include "server/http/openai_response.h"

struct MHD_Connection;

namespace flashserve::http {

class GenerationCall : public std::enable_shared_from_this<GenerationCall> {
 public:
  // `fd` is the connection's socket (for the disconnect check); -1 to skip the check.
  GenerationCall(MHD_Connection* connection, int fd, bool stream, ResponseMeta meta);

  // Submits to the engine. On error nothing was submitted and the status is the refusal.
  absl::Status submit(engine::Engine* engine, engine::GenerationRequest request);
  // The id the request got (valid after a successful submit()).
  engine::RequestId id() const;

  // ---- stream = false (on libmicrohttpd's thread, from the access handler) ----
  // True when the final event is here (then answer_*() are valid); false after suspending the
  // connection until it arrives.
  bool ready_or_suspend();
  int answer_status() const;
  std::string answer_body() const;

  // ---- stream = true: the content reader of the response ----
  // Bytes copied into `buf`; 0 after suspending the connection (nothing to send yet); -1 at
  // the end of the stream.
  long read(char* buf, size_t max);

  // libmicrohttpd is done with the connection's request (it must not be resumed after this).
  void connection_closed();
  // Server shutdown (libmicrohttpd must not stop with a suspended connection): resumes the
  // connection if suspended and never suspends it again; without its final event by then, a
  // whole completion answers 503 and a stream ends at once.
  void release();
  // Cancels the request when the client has closed its connection (the server's watcher
  // calls this for requests that produce no events: waiting in the queue, or in a prefill).
  void check_disconnect();

  // For the access line, once the request is over.
  struct Outcome {
    bool finished = false;  // the final event arrived
    engine::FinishReason finish_reason = engine::FinishReason::kStop;
    engine::Usage usage;
    engine::Timings timings;
    bool client_gone = false;
    absl::Status error;  // the final event's error, if any
  };
  Outcome outcome() const;

 private:
  void on_event(engine::GenerationEvent event);
  bool peer_closed() const;  // REQUIRES: mu_ held and the connection open

  MHD_Connection* const connection_;
  const int fd_;
  const bool stream_;
  const ResponseMeta meta_;
  engine::Engine* engine_ = nullptr;

  mutable std::mutex mu_;
  bool submitted_ = false;
  engine::RequestId id_ = 0;
  bool open_ = true;        // libmicrohttpd still owns the connection
  bool suspended_ = false;  // suspended, waiting for an event
  bool client_gone_ = false;
  bool released_ = false;   // release(): no more suspending
  std::string out_;         // stream: bytes not yet handed to libmicrohttpd
  size_t out_pos_ = 0;
  size_t text_offset_ = 0;  // stream: text bytes sent so far
  Gathered gathered_;       // stream = false
  std::optional<engine::GenerationEvent> final_;  // the final event (its text moved out)
};

}  // namespace flashserve::http
