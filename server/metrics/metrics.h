#pragma once
// Every Prometheus metric flashserve exports, defined in one place (metrics.cc) with its help
// text. docs/metrics.md is the reference: names, types, labels, meaning, example PromQL.
//
// Typical use: the server builds one Metrics, calls serve("0.0.0.0:9464") and hands a pointer to
// the engine and the API layer, which call the record_*/observe_*/set_* methods below. Tests
// build one without serve() and read serialize().
//
// Thread-safety: every method may be called from any thread (prometheus-cpp metrics are atomic
// or internally locked; the bandwidth windows have their own mutex).
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace prometheus {
template <typename T>
class Family;
class Counter;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus

namespace flashserve::metrics {

class HttpEndpoint;

// The final status of a request, the `status` label of flashserve_requests_total.
// The first six mirror engine::FinishReason (kInternal: the model failed during a step);
// the last three are requests never admitted, told apart so that alerts can separate client
// errors (kInvalidArgument) from overload (kCapacity) and a server that is loading the
// model or draining (kUnavailable).
enum class RequestStatus {
  kStop,
  kLength,
  kStopSequence,
  kCancelled,
  kDeadlineExceeded,
  kInternal,
  kInvalidArgument,
  kCapacity,
  kUnavailable,
};
inline constexpr int kNumRequestStatuses = 9;
std::string_view request_status_label(RequestStatus status);
// The status of a request refused with `refusal` (not OK): InvalidArgument / OutOfRange /
// FailedPrecondition / NotFound (the HTTP API's unknown model) -> kInvalidArgument,
// ResourceExhausted -> kCapacity, Unavailable -> kUnavailable, anything else -> kInternal.
RequestStatus rejected_status(const absl::Status& refusal);

// The API a request came in through, the `api` label of flashserve_requests_total.
enum class Api { kGrpc, kHttp };
inline constexpr int kNumApis = 2;
std::string_view api_label(Api api);

// The `part` label of flashserve_forward_seconds_total.
enum class ForwardPart { kAttention, kGemm, kOther };
inline constexpr int kNumForwardParts = 3;
std::string_view forward_part_label(ForwardPart part);

// What flashserve_build_info reports. `model` (when not empty) also becomes a constant
// `model` label on every metric, so dashboards can select by model.
struct BuildInfo {
  std::string version;
  std::string commit;
  std::string device;
  std::string model;
};

// The `phase` label of the attention kernel metrics.
enum class AttentionPhase { kPrefill, kDecode };
inline constexpr int kNumAttentionPhases = 2;
std::string_view attention_phase_label(AttentionPhase phase);

// Achieved bandwidth over a sliding window of recent kernel work: sum(bytes) / sum(seconds)
// of the samples added within the last `window` before the newest sample. Not thread-safe;
// Metrics locks around it.
class BandwidthWindow {
 public:
  using Clock = std::chrono::steady_clock;
  explicit BandwidthWindow(Clock::duration window) : window_(window) {}
  // REQUIRES: `now` does not go backwards between calls; kernel_seconds >= 0.
  void add(Clock::time_point now, double bytes, double kernel_seconds);
  // 0 when the window holds no kernel time.
  double bytes_per_second() const;

 private:
  struct Sample {
    Clock::time_point time;
    double bytes;
    double seconds;
  };
  Clock::duration window_;
  std::deque<Sample> samples_;
  double sum_bytes_ = 0;
  double sum_seconds_ = 0;
};

class Metrics {
 public:
  // Registers every metric; starts no HTTP server.
  explicit Metrics(const BuildInfo& info = {});

  // The device label of flashserve_build_info, once the model loader has resolved it.
  void set_device(const std::string& device);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Starts an HTTP server on `bind_address` ("0.0.0.0:9464", port 0 = any free port)
  // serving the registry at /metrics. InvalidArgument if the address cannot be bound;
  // FailedPrecondition if already serving.
  absl::Status serve(const std::string& bind_address);
  // The port serve() bound (useful with port 0); 0 before serve().
  int listening_port() const;

  // The registry in the Prometheus text exposition format (what /metrics returns).
  std::string serialize() const;

  // ---- requests ----
  // Exactly once per request, with its final status and the API it came through (the engine
  // for accepted requests and for requests submit() rejected; the API layer for requests it
  // rejects before submit()).
  void record_request(RequestStatus status, Api api);
  void record_auth_failure();  // a call refused with UNAUTHENTICATED
  void observe_queue_seconds(double seconds);         // submit -> first scheduled
  void observe_time_to_first_token(double seconds);   // submit -> first token sampled
  // Times between consecutive tokens of a request: one engine step's, in one update (one
  // lock, not one per token; the same buckets and sum as observing each).
  void observe_inter_token_latencies(const std::vector<double>& seconds);
  void observe_request_duration(double seconds);      // submit -> final event
  void add_prompt_tokens(int64_t num_tokens);         // at the request's final event
  void add_generated_tokens(int64_t num_tokens);      // as requests take their tokens

  // ---- engine ----
  void set_num_running(int num_running);
  void set_num_waiting(int num_waiting);
  // The bound on waiting requests (EngineOptions::max_waiting), set once by the engine.
  void set_waiting_capacity(int max_waiting);
  void set_kv_blocks(int num_used, int num_total);
  // One completed engine step that ran a batch of `num_seqs` sequences / `num_tokens` tokens;
  // a batch of one token a sequence (decodes only) is also timed on its own histogram.
  void record_step(int num_seqs, int num_tokens, double seconds);
  void add_preemptions(int num_preempted);
  // Where one forward pass spent its time: attention kernels, matrix multiplications, and
  // everything else (norms, RoPE, activations, sampling, copies). Negative values count as 0.
  void record_step_breakdown(double attention_seconds, double gemm_seconds,
                             double other_seconds);
  // Prefix cache: tokens looked up / found since the last call, cached blocks evicted since
  // the last call, and blocks cached now.
  void record_prefix_cache(int64_t num_queried_tokens, int64_t num_hit_tokens,
                           int64_t num_evictions, int num_cached_blocks);

  // ---- attention kernels ----
  // The attention work of one forward pass in `phase`: `num_calls` kernel launches that took
  // `seconds` in total and moved `bytes` / did `flops`. The latency histogram gets num_calls
  // observations of seconds / num_calls (so its _sum is the total kernel time and its _count
  // the number of launches); `now` feeds the bandwidth window. No-op when num_calls == 0.
  void record_attention(AttentionPhase phase, int num_calls, double seconds, double bytes,
                        double flops, BandwidthWindow::Clock::time_point now);

  // Width of the window behind flashserve_attention_kernel_bandwidth_bytes_per_second.
  static constexpr std::chrono::seconds kBandwidthWindow{1};

 private:
  // The constructor's parts: each registers one table of metrics.
  void register_requests();
  void register_engine();
  void register_attention();

  std::shared_ptr<prometheus::Registry> registry_;
  // std::mutex, not absl::Mutex: visible to ThreadSanitizer (scripts/sanitize.sh tsan).
  mutable std::mutex build_info_mu_;
  BuildInfo build_info_;  // guarded by build_info_mu_
  prometheus::Family<prometheus::Gauge>* build_info_family_ = nullptr;
  prometheus::Gauge* build_info_gauge_ = nullptr;  // guarded by build_info_mu_
  const std::map<std::string, std::string> constant_labels_;  // {model} or nothing
  // Declared after registry_, so it stops (joining its thread) before the registry goes.
  std::unique_ptr<HttpEndpoint> endpoint_;  // null until serve()

  prometheus::Counter* requests_[kNumApis][kNumRequestStatuses] = {};
  prometheus::Histogram* queue_seconds_ = nullptr;
  prometheus::Histogram* time_to_first_token_ = nullptr;
  prometheus::Histogram* inter_token_latency_ = nullptr;
  prometheus::Histogram* request_duration_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generated_tokens_ = nullptr;
  prometheus::Counter* auth_failures_ = nullptr;

  prometheus::Gauge* num_running_ = nullptr;
  prometheus::Gauge* num_waiting_ = nullptr;
  prometheus::Gauge* waiting_capacity_ = nullptr;
  prometheus::Gauge* kv_blocks_used_ = nullptr;
  prometheus::Gauge* kv_blocks_capacity_ = nullptr;
  prometheus::Counter* steps_ = nullptr;
  prometheus::Histogram* step_seconds_ = nullptr;
  prometheus::Histogram* decode_step_seconds_ = nullptr;
  prometheus::Histogram* batch_sequences_ = nullptr;
  prometheus::Histogram* batch_tokens_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  prometheus::Counter* forward_seconds_[kNumForwardParts] = {};
  prometheus::Counter* prefix_queried_tokens_ = nullptr;
  prometheus::Counter* prefix_hit_tokens_ = nullptr;
  prometheus::Counter* prefix_evictions_ = nullptr;
  prometheus::Gauge* prefix_cached_blocks_ = nullptr;

  prometheus::Histogram* attention_seconds_[kNumAttentionPhases] = {};
  prometheus::Counter* attention_bytes_[kNumAttentionPhases] = {};
  prometheus::Counter* attention_flops_[kNumAttentionPhases] = {};
  prometheus::Gauge* attention_bandwidth_[kNumAttentionPhases] = {};

  mutable std::mutex window_mu_;
  // Guarded by window_mu_.
  BandwidthWindow bandwidth_window_[kNumAttentionPhases] = {
      BandwidthWindow(kBandwidthWindow), BandwidthWindow(kBandwidthWindow)};
};

}  // namespace flashserve::metrics
