#include "server/metrics/metrics.h"

#include "server/metrics/http_endpoint.h"

#include <algorithm>
#include <exception>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace flashserve::metrics {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using Buckets = prometheus::Histogram::BucketBoundaries;

// Request latencies: fine below 100 ms (time to first token and inter-token latency live
// there on a GPU), coarse up to ten minutes (long generations on the CPU, queueing under
// overload), so that percentiles of slow requests stay finite.
const Buckets& latency_buckets() {
  static const Buckets kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075,
                                   0.1,   0.25,   0.5,   1,    2.5,   5,    10,
                                   30,    60,     120,   300,  600};
  return kBuckets;
}

// One attention kernel launch: microseconds on a GPU, up to ~1 s for a long CPU prefill.
const Buckets& kernel_buckets() {
  static const Buckets kBuckets = {1e-5,   2.5e-5, 5e-5, 1e-4,  2.5e-4, 5e-4, 1e-3, 2.5e-3,
                                   5e-3,   1e-2,   2.5e-2, 5e-2, 0.1,   0.25, 0.5,  1};
  return kBuckets;
}

// A decode-only engine step: 0.25-5 ms on a GPU in steps of a quarter millisecond up to 3 ms
// (a 5 % change of a ~2.5 ms step moves it a bucket), then coarse up to the CPU's seconds.
const Buckets& decode_step_buckets() {
  static const Buckets kBuckets = {2.5e-4, 5e-4,   7.5e-4, 1e-3,   1.25e-3, 1.5e-3, 1.75e-3,
                                   2e-3,   2.25e-3, 2.5e-3, 2.75e-3, 3e-3,   3.5e-3, 4e-3,
                                   5e-3,   7.5e-3, 1e-2,   2.5e-2, 5e-2,    0.1,    0.25,
                                   0.5,    1,      2.5,    5};
  return kBuckets;
}

// Powers of two from 1 to `max`.
Buckets power_of_two_buckets(double max) {
  Buckets buckets;
  for (double b = 1; b <= max; b *= 2) buckets.push_back(b);
  return buckets;
}

// Index of the histogram bucket that `value` falls into (bounds.size() = the +Inf bucket).
size_t bucket_index(const Buckets& bounds, double value) {
  return static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) -
                             bounds.begin());
}

}  // namespace

std::string_view request_status_label(RequestStatus status) {
  switch (status) {
    case RequestStatus::kStop: return "stop";
    case RequestStatus::kLength: return "length";
    case RequestStatus::kStopSequence: return "stop_sequence";
    case RequestStatus::kCancelled: return "cancelled";
    case RequestStatus::kDeadlineExceeded: return "deadline_exceeded";
    case RequestStatus::kInternal: return "internal";
    case RequestStatus::kInvalidArgument: return "invalid_argument";
    case RequestStatus::kCapacity: return "capacity";
    case RequestStatus::kUnavailable: return "unavailable";
  }
  return "unknown";
}

std::string_view api_label(Api api) {
  switch (api) {
    case Api::kGrpc: return "grpc";
    case Api::kHttp: return "http";
  }
  return "unknown";
}

RequestStatus rejected_status(const absl::Status& refusal) {
  switch (refusal.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kNotFound: return RequestStatus::kInvalidArgument;
    case absl::StatusCode::kResourceExhausted: return RequestStatus::kCapacity;
    case absl::StatusCode::kUnavailable: return RequestStatus::kUnavailable;
    default: return RequestStatus::kInternal;
  }
}

std::string_view forward_part_label(ForwardPart part) {
  switch (part) {
    case ForwardPart::kAttention: return "attention";
    case ForwardPart::kGemm: return "gemm";
    case ForwardPart::kOther: return "other";
  }
  return "unknown";
}

std::string_view attention_phase_label(AttentionPhase phase) {
  return phase == AttentionPhase::kPrefill ? "prefill" : "decode";
}

void BandwidthWindow::add(Clock::time_point now, double bytes, double kernel_seconds) {
  samples_.push_back({now, bytes, kernel_seconds});
  sum_bytes_ += bytes;
  sum_seconds_ += kernel_seconds;
  while (!samples_.empty() && samples_.front().time <= now - window_) {
    sum_bytes_ -= samples_.front().bytes;
    sum_seconds_ -= samples_.front().seconds;
    samples_.pop_front();
  }
  if (samples_.size() == 1) {  // resync the running sums, so rounding never accumulates
    sum_bytes_ = samples_.front().bytes;
    sum_seconds_ = samples_.front().seconds;
  }
}

double BandwidthWindow::bytes_per_second() const {
  return sum_seconds_ > 0 ? sum_bytes_ / sum_seconds_ : 0.0;
}

namespace {

// One unlabelled metric of a table: where its pointer goes, its name and help text.
template <typename Metric>
struct Row {
  Metric** slot;
  const char* name;
  const char* help;
  const Buckets* buckets = nullptr;  // histograms only
};

template <typename Builder>
auto& family(Builder builder, prometheus::Registry& r, const char* name, const char* help,
             const prometheus::Labels& constant) {
  return builder.Name(name).Help(help).Labels(constant).Register(r);
}

}  // namespace

Metrics::Metrics(const BuildInfo& info)
    : registry_(std::make_shared<prometheus::Registry>()),
      constant_labels_(info.model.empty() ? prometheus::Labels{}
                                          : prometheus::Labels{{"model", info.model}}) {
  build_info_family_ = &family(BuildGauge(), *registry_, "flashserve_build_info",
                               "Always 1; the labels say which build serves on which device.",
                               constant_labels_);
  {
    std::lock_guard<std::mutex> lock(build_info_mu_);
    build_info_ = info;
  }
  set_device(info.device);
  register_requests();
  register_engine();
  register_attention();
}

void Metrics::register_requests() {
  auto& r = *registry_;
  auto& requests = family(BuildCounter(), r, "flashserve_requests_total",
                          "Requests by API (grpc, http) and final status: stop (end-of-generation or stop token), "
                          "length (max_new_tokens or context), stop_sequence, cancelled, "
                          "deadline_exceeded, internal (the model failed); never admitted: "
                          "invalid_argument, capacity (queue or KV cache full), unavailable (loading "
                          "or draining).",
                          constant_labels_);
  for (int a = 0; a < kNumApis; ++a) {
    for (int i = 0; i < kNumRequestStatuses; ++i) {
      auto status = static_cast<RequestStatus>(i);
      requests_[a][i] = &requests.Add({{"api", std::string(api_label(static_cast<Api>(a)))},
                                       {"status", std::string(request_status_label(status))}});
    }
  }
  const Row<prometheus::Histogram> histograms[] = {
      {&queue_seconds_, "flashserve_request_queue_seconds",
       "Time from submission to the first engine step that scheduled the request.",
       &latency_buckets()},
      {&time_to_first_token_, "flashserve_time_to_first_token_seconds",
       "Time from submission to the first generated token.", &latency_buckets()},
      {&inter_token_latency_, "flashserve_inter_token_latency_seconds",
       "Time between consecutive generated tokens of a request.", &latency_buckets()},
      {&request_duration_, "flashserve_request_duration_seconds",
       "End-to-end time from submission to the final event, for every admitted request "
       "whatever its final status.",
       &latency_buckets()},
  };
  for (const auto& row : histograms) {
    *row.slot = &family(BuildHistogram(), r, row.name, row.help, constant_labels_)
                     .Add({}, *row.buckets);
  }
  const Row<prometheus::Counter> counters[] = {
      {&prompt_tokens_, "flashserve_prompt_tokens_total",
       "Prompt tokens of admitted requests, counted at their final event."},
      {&generated_tokens_, "flashserve_generated_tokens_total",
       "Tokens generated for requests, counted as each is taken by its request (a token "
       "computed for a request that finished meanwhile is not counted)."},
      {&auth_failures_, "flashserve_auth_failures_total",
       "Calls refused with UNAUTHENTICATED (no accepted bearer token), whatever the service: "
       "generation, health (when not open), reflection (when not open)."},
  };
  for (const auto& row : counters) {
    *row.slot = &family(BuildCounter(), r, row.name, row.help, constant_labels_).Add({});
  }
}

void Metrics::register_engine() {
  auto& r = *registry_;
  const Row<prometheus::Gauge> gauges[] = {
      {&num_running_, "flashserve_requests_running",
       "Requests holding KV blocks and being computed (prefill or decode)."},
      {&num_waiting_, "flashserve_requests_waiting",
       "Requests admitted but waiting to be scheduled (including preempted ones)."},
      {&waiting_capacity_, "flashserve_requests_waiting_capacity",
       "Requests that may wait for admission; beyond it new ones are refused (capacity)."},
      {&kv_blocks_used_, "flashserve_kv_cache_blocks_used",
       "KV cache blocks currently allocated to sequences."},
      {&kv_blocks_capacity_, "flashserve_kv_cache_blocks_capacity",
       "KV cache blocks in total (the cache's capacity)."},
      {&prefix_cached_blocks_, "flashserve_prefix_cache_blocks",
       "KV cache blocks registered in the prefix cache (referenced or not)."},
  };
  for (const auto& row : gauges) {
    *row.slot = &family(BuildGauge(), r, row.name, row.help, constant_labels_).Add({});
  }
  const Row<prometheus::Counter> counters[] = {
      {&steps_, "flashserve_engine_steps_total", "Engine steps whose forward pass completed."},
      {&preemptions_, "flashserve_engine_preemptions_total",
       "Running sequences preempted (KV blocks freed, recomputed later) because the KV cache "
       "ran out of blocks."},
      {&prefix_queried_tokens_, "flashserve_prefix_cache_queried_tokens_total",
       "Tokens of admitted sequences looked up in the prefix cache."},
      {&prefix_hit_tokens_, "flashserve_prefix_cache_hit_tokens_total",
       "Tokens of admitted sequences found in the prefix cache (their K/V reused, not "
       "recomputed)."},
      {&prefix_evictions_, "flashserve_prefix_cache_evictions_total",
       "Cached KV blocks nobody referenced, reclaimed for new K/V."},
  };
  for (const auto& row : counters) {
    *row.slot = &family(BuildCounter(), r, row.name, row.help, constant_labels_).Add({});
  }
  static const Buckets kSequenceBuckets = power_of_two_buckets(1024);
  static const Buckets kTokenBuckets = power_of_two_buckets(65536);
  const Row<prometheus::Histogram> histograms[] = {
      {&step_seconds_, "flashserve_engine_step_seconds",
       "Wall time of one engine step (schedule, forward pass, sampling, events).",
       &latency_buckets()},
      {&decode_step_seconds_, "flashserve_engine_decode_step_seconds",
       "Wall time of the engine steps whose batch is decodes only (one token a sequence): "
       "the floor of the inter-token latency. The steps with prompt tokens are the rest of "
       "flashserve_engine_step_seconds.",
       &decode_step_buckets()},
      {&batch_sequences_, "flashserve_batch_sequences",
       "Sequences in one engine step's batch (decodes plus prefill chunks).",
       &kSequenceBuckets},
      {&batch_tokens_, "flashserve_batch_tokens",
       "Tokens in one engine step's batch (decode tokens plus prefill chunk tokens).",
       &kTokenBuckets},
  };
  for (const auto& row : histograms) {
    *row.slot = &family(BuildHistogram(), r, row.name, row.help, constant_labels_)
                     .Add({}, *row.buckets);
  }
  auto& forward = family(BuildCounter(), r, "flashserve_forward_seconds_total",
                         "Forward-pass time by part: attention kernels, gemm (matrix "
                         "multiplications), other (norms, RoPE, activations, copies).",
                         constant_labels_);
  for (int i = 0; i < kNumForwardParts; ++i) {
    forward_seconds_[i] = &forward.Add(
        {{"part", std::string(forward_part_label(static_cast<ForwardPart>(i)))}});
  }
}

void Metrics::register_attention() {
  auto& r = *registry_;
  auto& seconds = family(BuildHistogram(), r, "flashserve_attention_kernel_seconds",
                         "Latency of one attention kernel launch (one layer) by phase. Within "
                         "an engine step every launch of a phase is recorded at the step's "
                         "mean.",
                         constant_labels_);
  auto& bytes = family(BuildCounter(), r, "flashserve_attention_kernel_bytes_total",
                       "Minimum memory traffic of the attention kernels by phase: Q, K, V "
                       "read once plus O written once.",
                       constant_labels_);
  auto& flops = family(BuildCounter(), r, "flashserve_attention_kernel_flops_total",
                       "Floating-point operations of the attention kernels by phase: 4 * "
                       "query * key pairs attended * heads * head_dim.",
                       constant_labels_);
  auto& bandwidth = family(BuildGauge(), r,
                           "flashserve_attention_kernel_bandwidth_bytes_per_second",
                           "Achieved attention kernel bandwidth by phase over the last second "
                           "of steps that ran the phase (bytes / kernel seconds).",
                           constant_labels_);
  for (int i = 0; i < kNumAttentionPhases; ++i) {
    const prometheus::Labels labels = {
        {"phase", std::string(attention_phase_label(static_cast<AttentionPhase>(i)))}};
    attention_seconds_[i] = &seconds.Add(labels, kernel_buckets());
    attention_bytes_[i] = &bytes.Add(labels);
    attention_flops_[i] = &flops.Add(labels);
    attention_bandwidth_[i] = &bandwidth.Add(labels);
  }
}

Metrics::~Metrics() = default;

void Metrics::set_device(const std::string& device) {
  auto or_unknown = [](const std::string& s) { return s.empty() ? std::string("unknown") : s; };
  std::lock_guard<std::mutex> lock(build_info_mu_);
  if (build_info_gauge_ != nullptr) build_info_family_->Remove(build_info_gauge_);
  build_info_.device = device;
  build_info_gauge_ = &build_info_family_->Add({{"version", or_unknown(build_info_.version)},
                                                {"commit", or_unknown(build_info_.commit)},
                                                {"device", or_unknown(device)}});
  build_info_gauge_->Set(1);
}

absl::Status Metrics::serve(const std::string& bind_address) {
  if (endpoint_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics: already serving on port ", listening_port()));
  }
  ASSIGN_OR_RETURN(endpoint_, HttpEndpoint::start(bind_address, "/metrics",
                                                  [this] { return serialize(); }));
  return absl::OkStatus();
}

int Metrics::listening_port() const { return endpoint_ == nullptr ? 0 : endpoint_->port(); }

std::string Metrics::serialize() const {
  prometheus::TextSerializer serializer;
  std::ostringstream out;
  serializer.Serialize(out, registry_->Collect());
  return out.str();
}

void Metrics::record_request(RequestStatus status, Api api) {
  requests_[static_cast<int>(api)][static_cast<int>(status)]->Increment();
}
void Metrics::record_auth_failure() { auth_failures_->Increment(); }
void Metrics::observe_queue_seconds(double seconds) { queue_seconds_->Observe(seconds); }
void Metrics::observe_time_to_first_token(double seconds) {
  time_to_first_token_->Observe(seconds);
}
void Metrics::observe_inter_token_latencies(const std::vector<double>& seconds) {
  if (seconds.empty()) return;
  const Buckets& bounds = latency_buckets();
  std::vector<double> increments(bounds.size() + 1, 0.0);
  double sum = 0;
  for (double s : seconds) {
    increments[bucket_index(bounds, s)] += 1;
    sum += s;
  }
  inter_token_latency_->ObserveMultiple(increments, sum);
}
void Metrics::observe_request_duration(double seconds) { request_duration_->Observe(seconds); }
void Metrics::add_prompt_tokens(int64_t num_tokens) {
  prompt_tokens_->Increment(static_cast<double>(num_tokens));
}
void Metrics::add_generated_tokens(int64_t num_tokens) {
  generated_tokens_->Increment(static_cast<double>(num_tokens));
}

void Metrics::set_num_running(int num_running) { num_running_->Set(num_running); }
void Metrics::set_num_waiting(int num_waiting) { num_waiting_->Set(num_waiting); }
void Metrics::set_waiting_capacity(int max_waiting) { waiting_capacity_->Set(max_waiting); }
void Metrics::set_kv_blocks(int num_used, int num_total) {
  kv_blocks_used_->Set(num_used);
  kv_blocks_capacity_->Set(num_total);
}

void Metrics::record_step(int num_seqs, int num_tokens, double seconds) {
  steps_->Increment();
  step_seconds_->Observe(seconds);
  if (num_seqs > 0 && num_tokens == num_seqs) decode_step_seconds_->Observe(seconds);
  batch_sequences_->Observe(num_seqs);
  batch_tokens_->Observe(num_tokens);
}

void Metrics::add_preemptions(int num_preempted) {
  if (num_preempted > 0) preemptions_->Increment(num_preempted);
}

void Metrics::record_step_breakdown(double attention_seconds, double gemm_seconds,
                                    double other_seconds) {
  const double parts[kNumForwardParts] = {attention_seconds, gemm_seconds, other_seconds};
  for (int i = 0; i < kNumForwardParts; ++i) {
    if (parts[i] > 0) forward_seconds_[i]->Increment(parts[i]);
  }
}

void Metrics::record_prefix_cache(int64_t num_queried_tokens, int64_t num_hit_tokens,
                                  int64_t num_evictions, int num_cached_blocks) {
  if (num_queried_tokens > 0) prefix_queried_tokens_->Increment(num_queried_tokens);
  if (num_hit_tokens > 0) prefix_hit_tokens_->Increment(num_hit_tokens);
  if (num_evictions > 0) prefix_evictions_->Increment(num_evictions);
  prefix_cached_blocks_->Set(num_cached_blocks);
}

void Metrics::record_attention(AttentionPhase phase, int num_calls, double seconds,
                               double bytes, double flops,
                               BandwidthWindow::Clock::time_point now) {
  if (num_calls <= 0) return;
  const int p = static_cast<int>(phase);
  const Buckets& bounds = kernel_buckets();
  std::vector<double> increments(bounds.size() + 1, 0.0);
  increments[bucket_index(bounds, seconds / num_calls)] = num_calls;
  attention_seconds_[p]->ObserveMultiple(increments, seconds);
  attention_bytes_[p]->Increment(bytes);
  attention_flops_[p]->Increment(flops);
  double bandwidth;
  {
    std::lock_guard<std::mutex> lock(window_mu_);
    bandwidth_window_[p].add(now, bytes, seconds);
    bandwidth = bandwidth_window_[p].bytes_per_second();
  }
  attention_bandwidth_[p]->Set(bandwidth);
}

}  // namespace flashserve::metrics
