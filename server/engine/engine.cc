#include "server/engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <new>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "server/engine/batch_builder.h"
#include "server/engine/block_manager.h"
#include "server/engine/engine_metrics.h"
#include "server/engine/event_delivery.h"
#include "server/engine/output_processor.h"
#include "server/engine/request_state.h"
#include "server/engine/scheduler.h"
#include "server/engine/sequence.h"

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

FinishReason finish_reason_of(StopReason r) {
  switch (r) {
    case StopReason::kStopSequence: return FinishReason::kStopSequence;
    case StopReason::kLength: return FinishReason::kLength;
    default: return FinishReason::kStop;
  }
}

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

  // One launched step, from its launch until its sampled tokens are taken. With a runner
  // that overlaps steps (model/runner.h) a step's tokens are taken in the next engine step,
  // after that one was launched; otherwise in its own (docs/design.md "Overlapped steps").
  // Two slots alternate, so that what the runner reads until its wait() (the batch, the
  // stats) stays where it was.
  struct Launched {
    model::ForwardBatch batch;  // capacity reused from step to step
    model::ForwardStats stats;
    // The step's batch, from schedule() until complete() has used it; empty after (with the
    // step in flight its sequences may finish and be freed): its sizes stay below.
    SchedulerOutput out;
    int num_sequences = 0;
    int num_tokens = 0;
    std::vector<RequestId> scheduled_ids;  // the requests it runs (fails with it)
    std::vector<RequestId> sample_ids;     // [num_samples] the request of each sample
    bool needs_tokens = false;  // a request uses penalties: its next spec needs these ids
    TimePoint begin;
  };

  // schedule -> launch -> (the step in flight: wait, tokens) -> complete -> (its tokens, or
  // this step's when the runner does not overlap): docs/design.md "The path of one request".
  void step();
  // Aborts expired requests, picks the step's batch and publishes what it runs.
  SchedulerOutput schedule(TimePoint now);
  // Builds the step's batch and launches it (a runner that does not overlap runs it through
  // forward() into sampled_).
  absl::Status launch(Launched* l);
  absl::Status launch_batch(Launched* l);
  // The step's scheduled tokens are computed: the scheduler's bookkeeping, and each sampled
  // sequence gets its token as a pending placeholder (Sequence::append_pending_token).
  void complete(Launched* l);
  // Waits for the step's tokens (overlap) into sampled_ and puts them into their sequences.
  // False when the runner failed (everything is failed then).
  bool wait_for(Launched* l);
  // Takes the step's tokens (events, stop checks), counts the step and publishes it.
  void take_tokens(const Launched& l);
  // wait_for + take_tokens of the step in flight.
  void take_in_flight();
  void abort_expired(TimePoint now);
  kernels::SampleSpec next_sample_spec(const Sequence& seq, model::ForwardBatch* batch);
  void take_token(RequestState* req, const model::SampledToken& t, TimePoint now);
  void emit(RequestState* req);
  // Hands the events of this iteration to their sinks, after publish(): a client that sees
  // a final event also sees its blocks freed in snapshot() and the metrics.
  void deliver();
  void finish(RequestState* req, FinishReason reason, absl::Status status, TimePoint now);
  void finish_all(FinishReason reason, const absl::Status& status = absl::OkStatus());
  // The runner failed the step of `failed` (request ids): fails every request and serves
  // no more.
  void fail_runner(const std::vector<RequestId>& failed, const absl::Status& error,
                   TimePoint now);
  // Publishes the queues and the KV cache to snapshot() and the metrics.
  void publish(TimePoint now, bool made_progress);

  std::unique_ptr<model::ModelRunner> runner_;
  const model::Tokenizer& tokenizer_;
  const EngineOptions options_;
  const std::unique_ptr<EngineMetrics> metrics_;  // never null (a null sink without metrics)
  const Clock& clock_;
  const int max_context_;
  const int vocab_size_;       // valid token ids: [0, vocab_size_)
  const uint64_t seed_base_;   // fallback seeds of requests without one

  // Engine thread only (and the destroying thread once the engine thread is gone).
  BlockManager blocks_;
  Scheduler scheduler_;
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> requests_;
  const bool overlap_;     // runner_->overlaps()
  Launched launched_[2];
  int in_flight_ = -1;     // the slot launched and completed, its tokens not taken; or -1
  TimePoint last_tokens_taken_;  // when take_tokens() last finished
  std::vector<model::SampledToken> sampled_;  // [num_samples] of the step being taken
  EventDelivery::Batch outbox_;  // this step's events, then posted to delivery_
  EventDelivery delivery_;       // runs the sinks on its own thread
  uint64_t num_steps_ = 0;

  // std::mutex/std::condition_variable rather than absl::Mutex: ThreadSanitizer intercepts
  // them, while Debian's Abseil is not built with it (scripts/sanitize.sh tsan).
  mutable std::mutex mu_;
  std::condition_variable input_cv_;        // has_input() may have turned true
  std::condition_variable loop_exited_cv_;  // loop_exited_ turned true
  // Guarded by mu_:
  std::vector<std::unique_ptr<RequestState>> inbox_;
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
      metrics_(make_engine_metrics(metrics)),
      clock_(options.clock != nullptr ? *options.clock : Clock::steady()),
      max_context_(options.max_context > 0 ? options.max_context
                                           : runner_->config().context_length),
      vocab_size_(std::min(runner_->config().vocab_size, tokenizer.vocab_size())),
      seed_base_(std::random_device{}()),
      blocks_(runner_->num_kv_blocks(), runner_->kv_block_size(), prefix_seed(options, *runner_)),
      scheduler_({options.max_num_seqs, options.max_batch_tokens}, &blocks_),
      overlap_(runner_->overlaps()),
      last_progress_(clock_.now()) {
  published_.num_kv_blocks_total = blocks_.num_total_blocks();
  published_.prefix_caching = blocks_.prefix_caching();
  metrics_->engine_created(blocks_.num_total_blocks(), options_.max_waiting);
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

// The engine's own invariants, whoever calls it (CONTRIBUTING.md "Errors": what the api
// checks and what the engine checks): rules that only shape a request's result (top_k above
// the vocabulary, stop strings) are the api's alone.
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
  const metrics::Api api = request.api;
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
      const uint64_t fallback_seed = seed_base_ ^ (id * 0x9E3779B97F4A7C15ull);
      inbox_.push_back(std::make_unique<RequestState>(id, std::move(request), std::move(sink),
                                                      tokenizer_, fallback_seed, now));
    }
  }
  if (status.ok()) input_cv_.notify_one();
  if (!status.ok()) {
    metrics_->request_refused(status, api);
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
  while (true) {
    // Never wait for input with a step in flight: its tokens are taken first.
    if (in_flight_ >= 0 && !scheduler_.has_work()) take_in_flight();
    if (!take_input()) break;
    step();
  }
  if (in_flight_ >= 0) take_in_flight();
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
  std::vector<std::unique_ptr<RequestState>> arrived;
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
    RequestState* r = req.get();
    requests_.emplace(r->seq.id(), std::move(req));
    scheduler_.add(&r->seq);
  }
  const TimePoint now = clock_.now();
  // A cancellation that arrives once the deadline has passed is the deadline's doing: gRPC
  // cancels a call whose deadline expired, usually before abort_expired() sees it.
  for (RequestId id : cancelled) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    RequestState* req = it->second.get();
    const bool expired = req->expired(now);
    finish(req, expired ? FinishReason::kDeadlineExceeded : FinishReason::kCancelled, {}, now);
  }
  return true;
}

void Engine::Impl::step() {
  // The next batch's sampling specs need the tokens of the step in flight (penalties).
  if (in_flight_ >= 0 && launched_[in_flight_].needs_tokens) take_in_flight();
  const TimePoint begin = clock_.now();
  SchedulerOutput out = schedule(begin);
  if (out.empty()) {  // nothing to launch (what runs is final): take what is in flight
    if (in_flight_ >= 0) take_in_flight();
    deliver();
    return;
  }
  const int previous = in_flight_;
  const int slot = previous >= 0 ? 1 - previous : 0;
  Launched& current = launched_[slot];
  current.out = std::move(out);
  current.begin = begin;
  if (const absl::Status status = launch(&current); !status.ok()) {
    fail_runner(current.scheduled_ids, status, clock_.now());
    return;
  }
  if (previous >= 0) {
    in_flight_ = -1;
    if (!wait_for(&launched_[previous])) return;
  }
  complete(&current);
  in_flight_ = slot;
  // The previous step's tokens while this one computes; a stop found now costs the stopped
  // request the token this step computes for it (dropped).
  if (previous >= 0) take_tokens(launched_[previous]);
  if (!overlap_) take_in_flight();
  deliver();
}

SchedulerOutput Engine::Impl::schedule(TimePoint now) {
  abort_expired(now);
  SchedulerOutput out = scheduler_.schedule();
  metrics_->step_scheduled(out, now);
  for (const ScheduledSequence& s : out.scheduled) s.seq->mark_scheduled(now);
  publish(now, /*made_progress=*/false);  // what this step runs is visible while it runs
  return out;
}

// An allocation that fails inside the step (the runner growing its workspace, the batch
// growing) fails the step like any runner error, instead of ending the process with an
// exception on the engine thread.
absl::Status Engine::Impl::launch(Launched* l) {
  l->scheduled_ids.clear();
  for (const ScheduledSequence& s : l->out.scheduled) l->scheduled_ids.push_back(s.seq->id());
  try {
    return launch_batch(l);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory during an engine step of ", l->out.scheduled.size(), " sequences"));
  }
}

absl::Status Engine::Impl::launch_batch(Launched* l) {
  build_batch(l->out, blocks_.block_size(),
              [this](const Sequence& seq, model::ForwardBatch* batch) {
                return next_sample_spec(seq, batch);
              },
              &l->batch);
  l->stats = model::ForwardStats();
  model::ForwardStats* stats = metrics_->wants_forward_stats() ? &l->stats : nullptr;
  if (overlap_) return runner_->launch(l->batch, stats);
  RETURN_IF_ERROR(runner_->forward(l->batch, &sampled_, stats));
  if (sampled_.size() != l->batch.sample_seqs.size()) {
    return absl::InternalError(absl::StrCat("model runner returned ", sampled_.size(),
                                            " tokens for ", l->batch.sample_seqs.size(),
                                            " sampled sequences"));
  }
  return absl::OkStatus();
}

void Engine::Impl::complete(Launched* l) {
  scheduler_.complete(l->out);
  l->sample_ids.clear();
  l->needs_tokens = false;
  for (size_t i = 0; i < l->batch.sample_seqs.size(); ++i) {
    Sequence* seq = l->out.scheduled[l->batch.sample_seqs[i]].seq;
    const RequestState& req = *requests_.at(seq->id());
    seq->append_pending_token(static_cast<int>(i));
    if (req.reached_max_new_tokens()) seq->set_final();
    l->needs_tokens = l->needs_tokens || req.sampler.uses_history();
    l->sample_ids.push_back(seq->id());
  }
  l->num_sequences = static_cast<int>(l->out.scheduled.size());
  l->num_tokens = l->out.num_tokens;
  l->out.scheduled.clear();
  l->out.preempted.clear();
}

bool Engine::Impl::wait_for(Launched* l) {
  if (overlap_) {
    absl::Status status = runner_->wait(&sampled_);
    if (status.ok() && sampled_.size() != l->sample_ids.size()) {
      status = absl::InternalError(absl::StrCat("model runner returned ", sampled_.size(),
                                                " tokens for ", l->sample_ids.size(),
                                                " sampled sequences"));
    }
    if (!status.ok()) {
      fail_runner(l->scheduled_ids, status, clock_.now());
      return false;
    }
  }
  // A request finished since the launch (cancelled, expired, stopped by the step before)
  // is gone, and so is its token.
  for (size_t i = 0; i < l->sample_ids.size(); ++i) {
    auto it = requests_.find(l->sample_ids[i]);
    if (it != requests_.end()) it->second->seq.resolve_pending_token(sampled_[i].token);
  }
  return true;
}

void Engine::Impl::take_tokens(const Launched& l) {
  const TimePoint end = clock_.now();
  int taken = 0;  // a request finished since the launch (cancelled, expired) drops its token
  for (size_t i = 0; i < l.sample_ids.size(); ++i) {
    auto it = requests_.find(l.sample_ids[i]);
    if (it == requests_.end()) continue;
    take_token(it->second.get(), sampled_[i], end);
    ++taken;
  }
  ++num_steps_;
  // A step's time runs from its scheduling, or from the previous step's tokens when it was
  // launched before those (overlapped), to its own tokens: consecutive steps do not overlap,
  // and the steps' times add up to the time spent stepping.
  const TimePoint begin = std::max(l.begin, last_tokens_taken_);
  last_tokens_taken_ = clock_.now();
  metrics_->step_done(l.num_sequences, l.num_tokens, taken, l.stats, begin, last_tokens_taken_);
  publish(last_tokens_taken_, /*made_progress=*/true);
}

void Engine::Impl::take_in_flight() {
  Launched& l = launched_[in_flight_];
  in_flight_ = -1;
  if (wait_for(&l)) take_tokens(l);
}

void Engine::Impl::abort_expired(TimePoint now) {
  std::vector<RequestState*> expired;
  for (auto& [id, req] : requests_) {
    if (req->expired(now)) expired.push_back(req.get());
  }
  std::sort(expired.begin(), expired.end(),
            [](RequestState* a, RequestState* b) { return a->seq.id() < b->seq.id(); });
  for (RequestState* req : expired) finish(req, FinishReason::kDeadlineExceeded, {}, now);
}

kernels::SampleSpec Engine::Impl::next_sample_spec(const Sequence& seq,
                                                   model::ForwardBatch* batch) {
  return requests_.at(seq.id())->sampler.next_spec(seq.prompt_tokens(), seq.generated_tokens(),
                                                   vocab_size_, &batch->penalty_tokens,
                                                   &batch->penalty_counts);
}

void Engine::Impl::take_token(RequestState* req, const model::SampledToken& t, TimePoint now) {
  metrics_->token_sampled(req->seq.arrival_time(), req->previous_token_time(), now);
  const StopReason stop = req->take_token(t, now);
  if (stop != StopReason::kNone) {
    finish(req, finish_reason_of(stop), {}, now);
  } else if (!req->pending.text.empty()) {
    emit(req);
  }
}

void Engine::Impl::emit(RequestState* req) {
  outbox_.emplace_back(req->sink, std::move(req->pending));
  req->pending = GenerationEvent();
}

void Engine::Impl::deliver() { delivery_.post(&outbox_); }

void Engine::Impl::finish(RequestState* req, FinishReason reason, absl::Status status,
                          TimePoint now) {
  GenerationEvent event = req->final_event(reason, std::move(status), now);
  scheduler_.finish(&req->seq);
  metrics_->request_finished(reason, event.status, req->api, event.timings.total_seconds,
                             req->seq.num_prompt_tokens());
  outbox_.emplace_back(std::move(req->sink), std::move(event));
  requests_.erase(req->seq.id());  // `req` is gone from here on
}

void Engine::Impl::finish_all(FinishReason reason, const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& req : inbox_) {
      RequestState* r = req.get();
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

void Engine::Impl::fail_runner(const std::vector<RequestId>& failed,
                               const absl::Status& error, TimePoint now) {
  in_flight_ = -1;  // the runner is not called again
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
  for (RequestId id : failed) {
    auto it = requests_.find(id);
    if (it != requests_.end()) finish(it->second.get(), FinishReason::kError, internal, now);
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
  metrics_->state(num_running, num_waiting, blocks_);
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
