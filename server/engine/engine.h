#pragma once
// The engine: one thread that owns the model runner and loops step() = schedule -> run ->
// postprocess (docs/design.md "The path of one request"); with a runner that overlaps steps
// (model/runner.h), a step's postprocess runs while the next step computes (docs/design.md
// "Overlapped steps"). Pure C++: no gRPC, no CUDA.
//
// Thread-safety: submit(), cancel(), snapshot() may be called from any thread. Event sinks are
// invoked on one delivery thread of the engine (server/engine/event_delivery.h), in order,
// while the engine thread runs the next step; they must not block (copy/queue and return).
// drain() and the destructor return only after every event has been delivered.
// Contract: every request accepted by submit() receives exactly one event with
// finished == true (its final status), whatever happens (stop, length, cancel, deadline,
// engine shutdown, model error). After that, its sink is never called again.
//
// A model runner failure is fatal: the device's state is unknown afterwards (a CUDA error
// poisons the context), so the engine runs nothing more. The requests of the failed step end
// with kError and Internal("the model runner failed: <its status>"); every other request in
// flight or waiting with kError and Unavailable; submit() refuses with that Unavailable status
// from then on, and snapshot().failure carries it (health NOT_SERVING).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/runner.h"
#include "model/sampling.h"
#include "model/text/tokenizer.h"
#include "server/engine/clock.h"
#include "server/metrics/metrics.h"

namespace flashserve::engine {

using RequestId = uint64_t;

struct GenerationRequest {
  std::vector<int32_t> prompt_tokens;       // already tokenized (api/ renders + tokenizes)
  model::SamplingParams sampling;           // validated by model::validate()
  int max_new_tokens = 16;                  // >= 1
  // Not emitted; never split across events. Callers pass non-empty ones (the api refuses
  // empty ones; the engine does not check: an empty one would end the request at once).
  std::vector<std::string> stop_strings;
  std::vector<int32_t> stop_token_ids;      // in addition to the model's end-of-generation ids
  bool ignore_eos = false;                  // keep going past end-of-generation tokens
  // Return the logprob of every sampled token (and its top sampling.num_logprobs
  // alternatives). num_logprobs > 0 implies it.
  bool logprobs = false;
  // Absolute deadline; the sequence is aborted at the next step once it has passed.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // The API the request came through: the `api` label it is counted under in the metrics.
  metrics::Api api = metrics::Api::kGrpc;
};

enum class FinishReason { kStop, kLength, kStopSequence, kCancelled, kDeadlineExceeded, kError };
std::string_view finish_reason_name(FinishReason r);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // top-n alternatives, if asked
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

struct Timings {
  double queue_seconds = 0;         // submit -> first scheduled
  double time_to_first_token = 0;   // submit -> first token sampled
  double total_seconds = 0;         // submit -> finished
};

// One event per step in which the request produced something visible (text, tokens) and a
// final one with finished == true.
struct GenerationEvent {
  std::string text;                   // newly completed UTF-8 text (stop strings withheld)
  std::vector<int32_t> token_ids;     // tokens sampled since the last event
  std::vector<TokenLogprob> logprobs; // parallel to token_ids when logprobs were asked
  bool finished = false;
  FinishReason finish_reason = FinishReason::kStop;
  absl::Status status;                // non-OK only with kError (e.g. model failure)
  Usage usage;                        // set on the final event
  Timings timings;                    // set on the final event
};

using EventSink = std::function<void(GenerationEvent)>;

// REQUIRES: max_num_seqs >= 1, max_batch_tokens >= 1 (api::validate_server_options checks the
// flags). A budget below max_num_seqs is legal, but then decodes past the budget wait their
// turn.
struct EngineOptions {
  int max_num_seqs = 64;          // running sequences per step
  int max_batch_tokens = 2048;    // tokens (prefill chunks + decodes) per step
  int max_waiting = 256;          // queue bound: submit() beyond it -> ResourceExhausted
  int max_context = 0;            // 0 = the model's context length
  // Reuse the KV blocks of prompt prefixes seen before (block_manager.h).
  bool prefix_caching = true;
  // snapshot().stalled: work pending and no step completed for this long.
  std::chrono::milliseconds stall_threshold{30000};
  // Time source for deadlines, stall detection and timings; null = Clock::steady(). Must
  // outlive the engine. GenerationRequest::deadline is on this clock.
  const Clock* clock = nullptr;
  // Called once, on the engine thread, when the model runner fails (with its status), before
  // the requests' final events are delivered; e.g. to log it. May be empty.
  std::function<void(const absl::Status&)> on_runner_failure = nullptr;
};

// What health checks and GetModelInfo need, consistent at one instant.
struct EngineSnapshot {
  int num_running = 0;
  int num_waiting = 0;
  int num_kv_blocks_used = 0;     // referenced by a sequence
  int num_kv_blocks_total = 0;
  int num_kv_blocks_cached = 0;   // in the prefix cache (referenced or not)
  bool prefix_caching = false;
  uint64_t num_steps = 0;
  // True when work is pending and no step has completed for the stall threshold.
  bool stalled = false;
  bool running = false;           // the engine thread is up and not draining
  // Non-OK (Unavailable, naming the runner's error) once the model runner failed: the engine
  // serves no more.
  absl::Status failure;
};

class Engine {
 public:
  // The runner is owned; the tokenizer must outlive the engine; metrics may be null (then
  // nothing is published: engine_metrics.h's null sink).
  Engine(std::unique_ptr<model::ModelRunner> runner, const model::Tokenizer& tokenizer,
         EngineOptions options, metrics::Metrics* metrics);
  ~Engine();  // stops the thread; outstanding requests finish with kCancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start();
  // Stops admitting (submit -> Unavailable), lets running and waiting requests finish within
  // `limit`, joins. When the limit passes first, what remains (running or waiting) finishes
  // with kError and an Unavailable status saying so, after the step in progress; returns
  // false then. A runner that never returns from a step blocks this (server_main.cc bounds it).
  bool drain(std::chrono::milliseconds limit = std::chrono::milliseconds::max());

  // InvalidArgument: empty prompt, prompt + max_new_tokens over the context, token ids
  // outside the vocabulary, sampling outside model::validate()'s ranges — the engine's own
  // invariants, checked for every caller (CONTRIBUTING.md "Errors"). ResourceExhausted:
  // waiting queue full, or the request could never fit in the KV cache. Unavailable:
  // draining/stopped.
  absl::StatusOr<RequestId> submit(GenerationRequest request, EventSink sink);
  // Aborts the request at the next step (final event kCancelled); unknown ids are ignored.
  void cancel(RequestId id);

  EngineSnapshot snapshot() const;
  const model::ModelConfig& model_config() const;
  int kv_block_size() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve::engine
