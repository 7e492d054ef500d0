#pragma once
// What the engine publishes about itself, in the engine's words: one call per event (a request
// refused, a step scheduled, a token sampled, a step done, a request finished, the queues and
// the KV cache after a step). Two sinks: make_engine_metrics(&registry) turns the calls into
// the Prometheus metrics of server/metrics (docs/metrics.md); make_engine_metrics(nullptr) is
// the null object, which drops them, so the engine never checks for "no metrics".
//
// Thread-safety: request_refused() may be called from any thread (submit()); everything else
// only from the engine thread (or the destroying thread once that is gone).
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "model/runner.h"
#include "server/engine/block_manager.h"
#include "server/engine/clock.h"
#include "server/engine/engine.h"
#include "server/engine/scheduler.h"

namespace flashserve::metrics {
class Metrics;
}

namespace flashserve::engine {

class EngineMetrics {
 public:
  using TimePoint = Clock::TimePoint;
  virtual ~EngineMetrics() = default;

  // True when step_done() reads the runner's ForwardStats; when false the engine passes the
  // runner no stats, which lets it skip measuring.
  virtual bool wants_forward_stats() const = 0;
  // Once, when the engine is built.
  virtual void engine_created(int num_kv_blocks, int max_waiting) = 0;
  // submit() refused a request that came through `api` with `refusal` (not OK).
  virtual void request_refused(const absl::Status& refusal, metrics::Api api) = 0;
  // schedule() picked `out` at `now`: its preemptions, and the queue time of every sequence
  // scheduled for the first time. REQUIRES: called before the sequences are marked scheduled.
  virtual void step_scheduled(const SchedulerOutput& out, TimePoint now) = 0;
  // A token was sampled for a sequence that arrived at `arrival`; `previous` is the time of
  // its previous token (none for the first).
  virtual void token_sampled(TimePoint arrival, const std::optional<TimePoint>& previous,
                             TimePoint now) = 0;
  // A step of `num_sequences` sequences and `num_tokens` tokens completed, `num_sampled` of its
  // sampled tokens taken by their requests (not those of requests finished since its launch):
  // it began at `begin`, its tokens are processed at `end`. `stats` is what
  // the runner measured. (Sizes, not the step's SchedulerOutput: by the time an overlapped
  // step's tokens are taken, sequences it ran may be finished and gone.)
  virtual void step_done(int num_sequences, int num_tokens, int num_sampled,
                         const model::ForwardStats& stats, TimePoint begin, TimePoint end) = 0;
  // A request that came through `api` ended with `reason` / `status` after `total_seconds`,
  // with `num_prompt_tokens`.
  virtual void request_finished(FinishReason reason, const absl::Status& status,
                                metrics::Api api, double total_seconds,
                                int num_prompt_tokens) = 0;
  // The queues and the KV cache as of now (gauges, and the prefix cache counters' growth).
  virtual void state(int num_running, int num_waiting, const BlockManager& blocks) = 0;
};

// The Prometheus sink over `metrics` (which must outlive it), or the null sink for nullptr.
std::unique_ptr<EngineMetrics> make_engine_metrics(metrics::Metrics* metrics);

}  // namespace flashserve::engine
