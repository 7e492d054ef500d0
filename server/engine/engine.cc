#include "server/engine/engine.h"
#include "server/engine/event_delivery.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "model/text/utf8.h"
#include "server/engine/block_manager.h"
#include "server/engine/output_processor.h"
#include "server/engine/scheduler.h"
#include "server/engine/sequence.h"
#include "server/metrics/metrics.h"

namespace flashserve::engine {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kDeadlineExceeded: return "deadline_exceeded";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

namespace {

using TimePoint = Clock::TimePoint;

double seconds_between(TimePoint from, TimePoint to) {
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

FinishReason finish_reason_of(StopReason r) {
  switch (r) {
    case StopReason::kStopSequence: return FinishReason::kStopSequence;
    case StopReason::kLength: return FinishReason::kLength;
    default: return FinishReason::kStop;
  }
}

// One accepted request: its sequence for the scheduler plus everything that turns logits into
// events.
struct Request {
  Request(RequestId id, GenerationRequest req, EventSink event_sink,
          const model::Tokenizer& tokenizer, uint64_t fallback_seed, TimePoint now)
      : seq(id, std::move(req.prompt_tokens), now),
        sampler(req.sampling, fallback_seed, req.logprobs),
        output(tokenizer, StopConditions{req.max_new_tokens, std::move(req.stop_strings),
                                         std::move(req.stop_token_ids), req.ignore_eos}),
        sink(std::make_shared<EventSink>(std::move(event_sink))),
        deadline(req.deadline),
        want_logprobs(req.logprobs || req.sampling.num_logprobs > 0) {}

  Sequence seq;
  model::Sampler sampler;
  OutputProcessor output;
  std::shared_ptr<EventSink> sink;
  std::optional<TimePoint> deadline;
  bool want_logprobs;
  GenerationEvent pending;  // tokens and text since the last event
  std::optional<TimePoint> first_token_time;
  TimePoint last_token_time;
};

// What makes two runners' K/V differ, for the root of the prefix-cache hash chains.
std::string model_identity(const model::ModelConfig& c, int block_size) {
  return absl::StrCat(c.architecture, "|", c.name, "|", c.num_layers, "|", c.hidden_size, "|",
                      c.num_heads, "|", c.num_kv_heads, "|", c.head_dim, "|", c.ffn_size, "|",
                      c.vocab_size, "|", c.rope_theta, "|", c.rms_eps, "|", block_size);
}

std::optional<BlockHash> prefix_seed(const EngineOptions& options,
                                     const model::ModelRunner& runner) {
  if (!options.prefix_caching) return std::nullopt;
  return block_hash_seed(model_identity(runner.config(), runner.kv_block_size()));
}

}  // namespace

class Engine::Impl {
 public:
  Impl(std::unique_ptr<model::ModelRunner> runner, const model::Tokenizer& tokenizer,
       EngineOptions options, metrics::Metrics* metrics);
  ~Impl();

  void start();
  bool drain(std::chrono::milliseconds limit);
  absl::StatusOr<RequestId> submit(GenerationRequest request, EventSink sink);
  void cancel(RequestId id);
  EngineSnapshot snapshot() const;
  const model::ModelConfig& model_config() const { return runner_->config(); }
  int kv_block_size() const { return blocks_.block_size(); }

 private:
  absl::Status validate(const GenerationRequest& request) const;
  // The three below REQUIRE mu_ held.
  absl::Status check_capacity(const GenerationRequest& request);
  bool has_input() const {
    return stop_ || draining_ || !inbox_.empty() || !cancelled_.empty();
  }
  // Waits up to `limit` for the loop to exit; true when it did.
  bool wait_loop_exited(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds limit);

  // ---- engine thread ----
  void loop();
  // Moves submitted requests into the scheduler and applies cancellations. Returns false
  // when the loop should exit.
  bool take_input();
  void step();
  void abort_expired(TimePoint now);
  model::ForwardBatch build_batch(const SchedulerOutput& out);
  void postprocess(const SchedulerOutput& out, const model::ForwardBatch& batch, TimePoint now);
  void take_token(Request* req, const model::SampledToken& t, TimePoint now);
  void emit(Request* req);
  // Hands the events of this iteration to their sinks, after publish(): a client that sees
  // a final event also sees its blocks freed in snapshot() and the metrics.
  void deliver();
  void finish(Request* req, FinishReason reason, absl::Status status, TimePoint now);
  void finish_all(FinishReason reason, const absl::Status& status = absl::OkStatus());
  // The runner failed the step `out`: fails every request and serves no more.
  void fail_runner(const SchedulerOutput& out, const absl::Status& error, TimePoint now);
  void publish(TimePoint now, bool made_progress);
  void record_step_metrics(const SchedulerOutput& out, const model::ForwardStats& stats,
                           TimePoint begin, TimePoint end);

  std::unique_ptr<model::ModelRunner> runner_;
  const model::Tokenizer& tokenizer_;
  const EngineOptions options_;
  metrics::Metrics* const metrics_;
  const Clock& clock_;
  const int max_context_;
  const int vocab_size_;       // valid token ids: [0, vocab_size_)
  const uint64_t seed_base_;   // fallback seeds of requests without one

  // Engine thread only (and the destroying thread once the engine thread is gone).
  BlockManager blocks_;
  Scheduler scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;
  std::vector<model::SampledToken> sampled_;  // [num_samples] of the current step
  std::vector<double> step_inter_token_seconds_;  // the current step's, for the metrics
  EventDelivery::Batch outbox_;  // this step's events, then posted to delivery_
  EventDelivery delivery_;       // runs the sinks on its own thread
  uint64_t num_steps_ = 0;
  PrefixCacheStats published_prefix_;  // as last added to the metrics

  // std::mutex/std::condition_variable rather than absl::Mutex: ThreadSanitizer intercepts
  // them, while Debian's Abseil is not built with it (scripts/sanitize.sh tsan).
  mutable std::mutex mu_;
  std::condition_variable input_cv_;        // has_input() may have turned true
  std::condition_variable loop_exited_cv_;  // loop_exited_ turned true
  // Guarded by mu_:
  std::vector<std::unique_ptr<Request>> inbox_;
  std::vector<RequestId> cancelled_;
  RequestId next_id_ = 1;
  bool started_ = false;
  bool draining_ = false;
  bool stop_ = false;
  // Set when a drain's limit passed: the loop fails what remains with this status and exits.
  absl::Status abort_status_;
  // Set when the model runner failed: submit() refuses with it (Unavailable).
  absl::Status failure_;
  bool loop_exited_ = false;
  EngineSnapshot published_;  // as of the last step
  TimePoint last_progress_;
  std::thread thread_;
};

Engine::Impl::Impl(std::unique_ptr<model::ModelRunner> runner,
                   const model::Tokenizer& tokenizer, EngineOptions options,
                   metrics::Metrics* metrics)
    : runner_(std::move(runner)),
      tokenizer_(tokenizer),
      options_(options),
      metrics_(metrics),
      clock_(options.clock != nullptr ? *options.clock : Clock::steady()),
      max_context_(options.max_context > 0 ? options.max_context
                                           : runner_->config().context_length),
      vocab_size_(std::min(runner_->config().vocab_size, tokenizer.vocab_size())),
      seed_base_(std::random_device{}()),
      blocks_(runner_->num_kv_blocks(), runner_->kv_block_size(), prefix_seed(options, *runner_)),
      scheduler_({options.max_num_seqs, options.max_batch_tokens}, &blocks_),
      last_progress_(clock_.now()) {
  published_.num_kv_blocks_total = blocks_.num_total_blocks();
  published_.prefix_caching = blocks_.prefix_caching();
  if (metrics_ != nullptr) {
    metrics_->set_kv_blocks(0, blocks_.num_total_blocks());
    metrics_->set_waiting_capacity(options_.max_waiting);
  }
}

Engine::Impl::~Impl() {
  bool joinable;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    joinable = thread_.joinable();
  }
  input_cv_.notify_all();
  if (joinable) thread_.join();
  finish_all(FinishReason::kCancelled);  // never started: nothing else will
}

void Engine::Impl::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || stop_ || draining_) return;
  started_ = true;
  thread_ = std::thread([this] { loop(); });
}

bool Engine::Impl::drain(std::chrono::milliseconds limit) {
  bool joinable;
  bool finished_in_time = true;
  {
    std::unique_lock<std::mutex> lock(mu_);
    draining_ = true;
    joinable = thread_.joinable();
    input_cv_.notify_all();
    if (joinable && !wait_loop_exited(lock, limit)) {
      finished_in_time = false;
      abort_status_ = absl::UnavailableError(absl::StrCat(
          "the server is shutting down and its drain limit of ",
          absl::FormatDuration(absl::FromChrono(limit)),
          " passed before this request finished; retry elsewhere"));
    }
  }
  if (joinable) {
    thread_.join();  // after the step in progress, if any
  } else {
    finish_all(FinishReason::kCancelled);
  }
  return finished_in_time;
}

bool Engine::Impl::wait_loop_exited(std::unique_lock<std::mutex>& lock,
                                    std::chrono::milliseconds limit) {
  const auto exited = [this] { return loop_exited_; };
  // Past ~100 years wait_for's deadline (now + limit) would overflow: that is "no limit".
  if (limit >= std::chrono::hours(24 * 365 * 100)) {
    loop_exited_cv_.wait(lock, exited);
    return true;
  }
  return loop_exited_cv_.wait_for(lock, limit, exited);
}

absl::Status Engine::Impl::validate(const GenerationRequest& r) const {
  if (r.prompt_tokens.empty()) return absl::InvalidArgumentError("prompt_tokens is empty");
  for (size_t i = 0; i < r.prompt_tokens.size(); ++i) {
    if (r.prompt_tokens[i] < 0 || r.prompt_tokens[i] >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat("prompt_tokens[", i, "] = ",
                                                     r.prompt_tokens[i], " is not in [0, ",
                                                     vocab_size_, ")"));
    }
  }
  if (r.max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens = ", r.max_new_tokens, " must be >= 1"));
  }
  const int64_t total = static_cast<int64_t>(r.prompt_tokens.size()) + r.max_new_tokens;
  if (total > max_context_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt_tokens (", r.prompt_tokens.size(), ") + max_new_tokens (", r.max_new_tokens,
        ") = ", total, " exceeds the context length ", max_context_));
  }
  for (size_t i = 0; i < r.stop_strings.size(); ++i) {
    const std::string& s = r.stop_strings[i];
    if (s.empty() || !model::is_valid_utf8(s)) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop_strings[", i, "] is ", s.empty() ? "empty" : "not valid UTF-8"));
    }
  }
  if (r.sampling.top_k > vocab_size_) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: top_k must be in [0, ", vocab_size_,
                                                   "] (the vocabulary), got ", r.sampling.top_k));
  }
  return model::validate(r.sampling);
}

absl::Status Engine::Impl::check_capacity(const GenerationRequest& r) {
  // Tokens whose K/V must be cached at the end: the last sampled token never is.
  const int num_tokens = static_cast<int>(r.prompt_tokens.size()) + r.max_new_tokens - 1;
  if (blocks_.num_blocks_for(num_tokens) > blocks_.num_total_blocks()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request needs ", blocks_.num_blocks_for(num_tokens), " KV blocks of ",
        blocks_.block_size(), " tokens for ", num_tokens,
        " tokens but the KV cache has only ", blocks_.num_total_blocks()));
  }
  const int num_waiting = published_.num_waiting + static_cast<int>(inbox_.size());
  if (num_waiting >= options_.max_waiting) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "waiting queue is full (", num_waiting, " requests, max_waiting ",
        options_.max_waiting, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RequestId> Engine::Impl::submit(GenerationRequest request, EventSink sink) {
  absl::Status status = validate(request);
  RequestId id = 0;
  if (status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || stop_) {
      status = absl::UnavailableError("engine is draining or stopped");
    } else if (!failure_.ok()) {
      status = failure_;
    } else {
      status = check_capacity(request);
    }
    if (status.ok()) {
      id = next_id_++;
      const TimePoint now = clock_.now();
      if (published_.num_running + published_.num_waiting == 0 && inbox_.empty()) {
        last_progress_ = now;  // idle until now: the stall clock starts with this request
      }
      inbox_.push_back(std::make_unique<Request>(id, std::move(request), std::move(sink),
                                                 tokenizer_, seed_base_ ^ (id * 0x9E3779B97F4A7C15ull),
                                                 now));
    }
  }
  if (status.ok()) input_cv_.notify_one();
  if (!status.ok()) {
    if (metrics_ != nullptr) metrics_->record_request(metrics::rejected_status(status));
    return status;
  }
  return id;
}

void Engine::Impl::cancel(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.push_back(id);
  }
  input_cv_.notify_one();
}

EngineSnapshot Engine::Impl::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineSnapshot s = published_;
  s.num_waiting += static_cast<int>(inbox_.size());
  const bool pending = s.num_running + s.num_waiting > 0;
  s.stalled = pending && clock_.now() - last_progress_ > options_.stall_threshold;
  s.running = started_ && !draining_ && !stop_;
  s.failure = failure_;
  return s;
}

// ---- engine thread -------------------------------------------------------------------------

void Engine::Impl::loop() {
  while (take_input()) step();
  absl::Status abort_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    abort_status = abort_status_;
  }
  if (abort_status.ok()) {
    finish_all(FinishReason::kCancelled);  // stopped by the destructor with work left
  } else {
    finish_all(FinishReason::kError, abort_status);  // a drain's limit passed
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    loop_exited_ = true;
  }
  loop_exited_cv_.notify_all();
}

bool Engine::Impl::take_input() {
  std::vector<std::unique_ptr<Request>> arrived;
  std::vector<RequestId> cancelled;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!scheduler_.has_work()) input_cv_.wait(lock, [this] { return has_input(); });
    if (stop_ || !abort_status_.ok()) return false;
    if (draining_ && inbox_.empty() && !scheduler_.has_work()) return false;
    arrived.swap(inbox_);
    cancelled.swap(cancelled_);
  }
  for (auto& req : arrived) {
    Request* r = req.get();
    requests_.emplace(r->seq.id(), std::move(req));
    scheduler_.add(&r->seq);
  }
  const TimePoint now = clock_.now();
  // A cancellation that arrives once the deadline has passed is the deadline's doing: gRPC
  // cancels a call whose deadline expired, usually before abort_expired() sees it.
  for (RequestId id : cancelled) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    Request* req = it->second.get();
    const bool expired = req->deadline && now >= *req->deadline;
    finish(req, expired ? FinishReason::kDeadlineExceeded : FinishReason::kCancelled, {}, now);
  }
  return true;
}

void Engine::Impl::step() {
  const TimePoint begin = clock_.now();
  abort_expired(begin);
  const SchedulerOutput out = scheduler_.schedule();
  if (metrics_ != nullptr) metrics_->add_preemptions(static_cast<int>(out.preempted.size()));
  publish(begin, /*made_progress=*/false);  // what this step runs is visible while it runs
  if (out.empty()) {
    deliver();
    return;
  }
  for (const ScheduledSequence& s : out.scheduled) {
    if (!s.seq->was_scheduled() && metrics_ != nullptr) {
      metrics_->observe_queue_seconds(seconds_between(s.seq->arrival_time(), begin));
    }
    s.seq->mark_scheduled(begin);
  }
  const model::ForwardBatch batch = build_batch(out);
  model::ForwardStats stats;
  // Without metrics nothing reads the stats: a null pointer lets the runner skip measuring.
  absl::Status status =
      runner_->forward(batch, &sampled_, metrics_ != nullptr ? &stats : nullptr);
  if (status.ok() && sampled_.size() != batch.sample_seqs.size()) {
    status = absl::InternalError(absl::StrCat("model runner returned ", sampled_.size(),
                                              " tokens for ", batch.sample_seqs.size(),
                                              " sampled sequences"));
  }
  const TimePoint end = clock_.now();
  if (!status.ok()) {
    fail_runner(out, status, end);
    return;
  }
  scheduler_.complete(out);
  postprocess(out, batch, end);
  ++num_steps_;
  record_step_metrics(out, stats, begin, clock_.now());
  publish(clock_.now(), /*made_progress=*/true);
  deliver();
}

void Engine::Impl::abort_expired(TimePoint now) {
  std::vector<Request*> expired;
  for (auto& [id, req] : requests_) {
    if (req->deadline && now >= *req->deadline) expired.push_back(req.get());
  }
  std::sort(expired.begin(), expired.end(),
            [](Request* a, Request* b) { return a->seq.id() < b->seq.id(); });
  for (Request* req : expired) finish(req, FinishReason::kDeadlineExceeded, {}, now);
}

model::ForwardBatch Engine::Impl::build_batch(const SchedulerOutput& out) {
  model::ForwardBatch b;
  const int block_size = blocks_.block_size();
  b.cu_seqlens_q.push_back(0);
  for (const ScheduledSequence& s : out.scheduled) {
    b.max_blocks_per_seq =
        std::max(b.max_blocks_per_seq, static_cast<int>(s.seq->block_table().size()));
  }
  b.block_tables.assign(out.scheduled.size() * b.max_blocks_per_seq, -1);
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const Sequence& seq = *out.scheduled[i].seq;
    const int first = seq.num_computed_tokens();
    const int last = first + out.scheduled[i].num_new_tokens;  // exclusive
    for (int pos = first; pos < last; ++pos) {
      b.token_ids.push_back(seq.tokens()[pos]);
      b.positions.push_back(pos);
      b.slot_mapping.push_back(seq.block_table()[pos / block_size] * block_size +
                               pos % block_size);
    }
    b.cu_seqlens_q.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.seqlens_k.push_back(last);
    std::copy(seq.block_table().begin(), seq.block_table().end(),
              b.block_tables.begin() + i * b.max_blocks_per_seq);
    if (!out.scheduled[i].samples) continue;  // intermediate prefill chunk: nothing sampled
    b.sample_seqs.push_back(static_cast<int32_t>(i));
    b.sample_specs.push_back(requests_.at(seq.id())->sampler.next_spec(
        seq.prompt_tokens(), seq.generated_tokens(), vocab_size_, &b.penalty_tokens,
        &b.penalty_counts));
  }
  return b;
}

void Engine::Impl::postprocess(const SchedulerOutput& out, const model::ForwardBatch& batch,
                               TimePoint now) {
  for (size_t i = 0; i < batch.sample_seqs.size(); ++i) {
    const ScheduledSequence& s = out.scheduled[batch.sample_seqs[i]];
    take_token(requests_.at(s.seq->id()).get(), sampled_[i], now);
  }
  if (metrics_ != nullptr) {  // once per step, not per token: one lock each
    metrics_->add_generated_tokens(static_cast<int64_t>(batch.sample_seqs.size()));
    metrics_->observe_inter_token_latencies(step_inter_token_seconds_);
    step_inter_token_seconds_.clear();
  }
}

void Engine::Impl::take_token(Request* req, const model::SampledToken& r, TimePoint now) {
  Sequence& seq = req->seq;
  seq.append_token(r.token);
  if (metrics_ != nullptr) {
    if (req->first_token_time) {
      step_inter_token_seconds_.push_back(seconds_between(req->last_token_time, now));
    } else {
      metrics_->observe_time_to_first_token(seconds_between(seq.arrival_time(), now));
    }
  }
  if (!req->first_token_time) req->first_token_time = now;
  req->last_token_time = now;

  req->pending.token_ids.push_back(r.token);
  if (req->want_logprobs) {
    req->pending.logprobs.push_back({r.token, r.logprob, r.top_logprobs});
  }
  OutputProcessor::Output o = req->output.append(r.token);
  req->pending.text += o.text;
  if (o.stop != StopReason::kNone) {
    finish(req, finish_reason_of(o.stop), {}, now);
  } else if (!req->pending.text.empty()) {
    emit(req);
  }
}

void Engine::Impl::emit(Request* req) {
  outbox_.emplace_back(req->sink, std::move(req->pending));
  req->pending = GenerationEvent();
}

void Engine::Impl::deliver() { delivery_.post(&outbox_); }

void Engine::Impl::finish(Request* req, FinishReason reason, absl::Status status,
                          TimePoint now) {
  Sequence& seq = req->seq;
  GenerationEvent event = std::move(req->pending);
  if (reason == FinishReason::kCancelled || reason == FinishReason::kDeadlineExceeded ||
      reason == FinishReason::kError) {
    event.text += req->output.flush();  // held-back text that never became a stop string
  }
  event.finished = true;
  event.finish_reason = reason;
  event.status = std::move(status);
  event.usage = {seq.num_prompt_tokens(), seq.num_generated_tokens()};
  event.timings.queue_seconds = seconds_between(
      seq.arrival_time(), seq.was_scheduled() ? seq.first_scheduled_time() : now);
  event.timings.time_to_first_token =
      req->first_token_time ? seconds_between(seq.arrival_time(), *req->first_token_time) : 0;
  event.timings.total_seconds = seconds_between(seq.arrival_time(), now);
  scheduler_.finish(&seq);
  if (metrics_ != nullptr) {
    metrics_->record_request(metrics_status(reason, event.status));
    metrics_->observe_request_duration(event.timings.total_seconds);
    metrics_->add_prompt_tokens(seq.num_prompt_tokens());
  }
  outbox_.emplace_back(std::move(req->sink), std::move(event));
  requests_.erase(seq.id());  // `req` is gone from here on
}

void Engine::Impl::finish_all(FinishReason reason, const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& req : inbox_) {
      Request* r = req.get();
      requests_.emplace(r->seq.id(), std::move(req));
    }
    inbox_.clear();
    cancelled_.clear();
  }
  std::vector<RequestId> ids;
  for (const auto& [id, req] : requests_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  const TimePoint now = clock_.now();
  for (RequestId id : ids) finish(requests_.at(id).get(), reason, status, now);
  publish(now, /*made_progress=*/false);
  deliver();
  delivery_.flush();  // the engine stops: every final event is out before it returns
}

void Engine::Impl::fail_runner(const SchedulerOutput& out, const absl::Status& error,
                               TimePoint now) {
  const std::string cause = absl::StrCat("the model runner failed: ", error.ToString());
  const absl::Status refusal = absl::UnavailableError(absl::StrCat(
      cause, "; this server no longer serves (health NOT_SERVING); retry on another replica"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = refusal;  // from here on submit() refuses: nothing new reaches the inbox
  }
  // Before the requests' final events: whoever sees one can count on the hook having run.
  if (options_.on_runner_failure) options_.on_runner_failure(error);
  const absl::Status internal = absl::InternalError(cause);
  for (const ScheduledSequence& s : out.scheduled) {
    finish(requests_.at(s.seq->id()).get(), FinishReason::kError, internal, now);
  }
  finish_all(FinishReason::kError, refusal);  // running but not in this step, and waiting
}

void Engine::Impl::publish(TimePoint now, bool made_progress) {
  const int num_running = scheduler_.num_running();
  const int num_waiting = scheduler_.num_waiting();
  {
    std::lock_guard<std::mutex> lock(mu_);
    published_.num_running = num_running;
    published_.num_waiting = num_waiting;
    published_.num_kv_blocks_used = blocks_.num_used_blocks();
    published_.num_kv_blocks_cached = blocks_.num_cached_blocks();
    published_.num_steps = num_steps_;
    if (made_progress || !scheduler_.has_work()) last_progress_ = now;
  }
  if (metrics_ != nullptr) {
    metrics_->set_num_running(num_running);
    metrics_->set_num_waiting(num_waiting);
    metrics_->set_kv_blocks(blocks_.num_used_blocks(), blocks_.num_total_blocks());
    const PrefixCacheStats& p = blocks_.prefix_stats();
    metrics_->record_prefix_cache(p.num_queried_tokens - published_prefix_.num_queried_tokens,
                                  p.num_hit_tokens - published_prefix_.num_hit_tokens,
                                  p.num_evictions - published_prefix_.num_evictions,
                                  blocks_.num_cached_blocks());
    published_prefix_ = p;
  }
}

void Engine::Impl::record_step_metrics(const SchedulerOutput& out,
                                       const model::ForwardStats& stats,
                                       TimePoint begin, TimePoint end) {
  if (metrics_ == nullptr) return;
  metrics_->record_step(static_cast<int>(out.scheduled.size()), out.num_tokens,
                        seconds_between(begin, end));
  const auto record = [&](metrics::AttentionPhase phase, const model::AttentionPhaseStats& s) {
    metrics_->record_attention(phase, s.calls, s.seconds, s.bytes, s.flops, end);
  };
  record(metrics::AttentionPhase::kPrefill, stats.prefill);
  record(metrics::AttentionPhase::kDecode, stats.decode);
  if (stats.breakdown.measured) {
    metrics_->record_step_breakdown(stats.breakdown.attention_seconds,
                                    stats.breakdown.gemm_seconds, stats.breakdown.other_seconds);
  }
}

// ---- Engine --------------------------------------------------------------------------------

Engine::Engine(std::unique_ptr<model::ModelRunner> runner, const model::Tokenizer& tokenizer,
               EngineOptions options, metrics::Metrics* metrics)
    : impl_(std::make_unique<Impl>(std::move(runner), tokenizer, options, metrics)) {}
Engine::~Engine() = default;
void Engine::start() { impl_->start(); }
bool Engine::drain(std::chrono::milliseconds limit) { return impl_->drain(limit); }
absl::StatusOr<RequestId> Engine::submit(GenerationRequest request, EventSink sink) {
  return impl_->submit(std::move(request), std::move(sink));
}
void Engine::cancel(RequestId id) { impl_->cancel(id); }
EngineSnapshot Engine::snapshot() const { return impl_->snapshot(); }
const model::ModelConfig& Engine::model_config() const { return impl_->model_config(); }
int Engine::kv_block_size() const { return impl_->kv_block_size(); }

}  // namespace flashserve::engine
