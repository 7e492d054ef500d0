#include "server/engine/engine_metrics.h"

#include <vector>

#include "server/metrics/metrics.h"

namespace flashserve::engine {
namespace {

double seconds_between(Clock::TimePoint from, Clock::TimePoint to) {
  return std::chrono::duration<double>(to - from).count();
}

// By the status the client sees: a kError request counts as internal or, when the server
// ended it for a reason of its own (a drain limit, another step's runner failure), as
// unavailable.
metrics::RequestStatus metrics_status(FinishReason r, const absl::Status& status) {
  switch (r) {
    case FinishReason::kStop: return metrics::RequestStatus::kStop;
    case FinishReason::kLength: return metrics::RequestStatus::kLength;
    case FinishReason::kStopSequence: return metrics::RequestStatus::kStopSequence;
    case FinishReason::kCancelled: return metrics::RequestStatus::kCancelled;
    case FinishReason::kDeadlineExceeded: return metrics::RequestStatus::kDeadlineExceeded;
    case FinishReason::kError:
      return status.code() == absl::StatusCode::kUnavailable
                 ? metrics::RequestStatus::kUnavailable
                 : metrics::RequestStatus::kInternal;
  }
  return metrics::RequestStatus::kInternal;
}

class NullEngineMetrics final : public EngineMetrics {
 public:
  bool wants_forward_stats() const override { return false; }
  void engine_created(int, int) override {}
  void request_refused(const absl::Status&, metrics::Api) override {}
  void step_scheduled(const SchedulerOutput&, TimePoint) override {}
  void token_sampled(TimePoint, const std::optional<TimePoint>&, TimePoint) override {}
  void step_done(int, int, int, const model::ForwardStats&, TimePoint,
                 TimePoint) override {}
  void request_finished(FinishReason, const absl::Status&, metrics::Api, double, int) override {}
  void state(int, int, const BlockManager&) override {}
};

class PrometheusEngineMetrics final : public EngineMetrics {
 public:
  explicit PrometheusEngineMetrics(metrics::Metrics* metrics) : m_(*metrics) {}

  bool wants_forward_stats() const override { return true; }

  void engine_created(int num_kv_blocks, int max_waiting) override {
    m_.set_kv_blocks(0, num_kv_blocks);
    m_.set_waiting_capacity(max_waiting);
  }

  void request_refused(const absl::Status& refusal, metrics::Api api) override {
    m_.record_request(metrics::rejected_status(refusal), api);
  }

  void step_scheduled(const SchedulerOutput& out, TimePoint now) override {
    m_.add_preemptions(static_cast<int>(out.preempted.size()));
    for (const ScheduledSequence& s : out.scheduled) {
      if (!s.seq->was_scheduled()) {
        m_.observe_queue_seconds(seconds_between(s.seq->arrival_time(), now));
      }
    }
  }

  void token_sampled(TimePoint arrival, const std::optional<TimePoint>& previous,
                     TimePoint now) override {
    if (previous) {
      step_inter_token_seconds_.push_back(seconds_between(*previous, now));
    } else {
      m_.observe_time_to_first_token(seconds_between(arrival, now));
    }
  }

  void step_done(int num_sequences, int num_tokens, int num_sampled,
                 const model::ForwardStats& stats, TimePoint begin, TimePoint end) override {
    // Once per step, not per token: one lock each.
    m_.add_generated_tokens(num_sampled);
    m_.observe_inter_token_latencies(step_inter_token_seconds_);
    step_inter_token_seconds_.clear();
    m_.record_step(num_sequences, num_tokens, seconds_between(begin, end));
    m_.record_attention(metrics::AttentionPhase::kPrefill, stats.prefill.calls,
                        stats.prefill.seconds, stats.prefill.bytes, stats.prefill.flops, end);
    m_.record_attention(metrics::AttentionPhase::kDecode, stats.decode.calls,
                        stats.decode.seconds, stats.decode.bytes, stats.decode.flops, end);
    const model::StepBreakdown& b = stats.breakdown;
    if (b.measured) {
      m_.record_step_breakdown(b.attention_seconds, b.gemm_seconds, b.other_seconds);
    }
  }

  void request_finished(FinishReason reason, const absl::Status& status, metrics::Api api,
                        double total_seconds, int num_prompt_tokens) override {
    m_.record_request(metrics_status(reason, status), api);
    m_.observe_request_duration(total_seconds);
    m_.add_prompt_tokens(num_prompt_tokens);
  }

  void state(int num_running, int num_waiting, const BlockManager& blocks) override {
    m_.set_num_running(num_running);
    m_.set_num_waiting(num_waiting);
    m_.set_kv_blocks(blocks.num_used_blocks(), blocks.num_total_blocks());
    const PrefixCacheStats& p = blocks.prefix_stats();
    m_.record_prefix_cache(p.num_queried_tokens - published_prefix_.num_queried_tokens,
                           p.num_hit_tokens - published_prefix_.num_hit_tokens,
                           p.num_evictions - published_prefix_.num_evictions,
                           blocks.num_cached_blocks());
    published_prefix_ = p;
  }

 private:
  metrics::Metrics& m_;
  std::vector<double> step_inter_token_seconds_;  // the current step's
  PrefixCacheStats published_prefix_;             // as last added to the metrics
};

}  // namespace

std::unique_ptr<EngineMetrics> make_engine_metrics(metrics::Metrics* metrics) {
  if (metrics == nullptr) return std::make_unique<NullEngineMetrics>();
  return std::make_unique<PrometheusEngineMetrics>(metrics);
}

}  // namespace flashserve::engine
