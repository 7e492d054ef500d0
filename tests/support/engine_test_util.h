#pragma once
// Helpers for the engine tests: an engine over the fake runner/tokenizer, per-request event
// streams, and the reference greedy output computed directly from the fake model.
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/engine/engine.h"
#include "server/metrics/metrics.h"
#include "tests/support/engine_fakes.h"

#ifndef FLASHSERVE_TEST_OVERLAP
#define FLASHSERVE_TEST_OVERLAP 0
#endif

namespace flashserve::engine::fakes {

// The events of one request; checks that nothing follows the final event.
class Stream : public std::enable_shared_from_this<Stream> {
 public:
  static std::shared_ptr<Stream> make() { return std::make_shared<Stream>(); }

  EventSink sink() {
    return [self = shared_from_this()](GenerationEvent e) { self->on_event(std::move(e)); };
  }
  // Also run `hook` on the engine thread for every event (e.g. to cancel).
  EventSink sink(std::function<void(const GenerationEvent&)> hook) {
    return [self = shared_from_this(), hook](GenerationEvent e) {
      hook(e);
      self->on_event(std::move(e));
    };
  }

  bool wait_final(absl::Duration timeout = absl::Seconds(30)) {
    std::unique_lock<std::mutex> lock(mu_);
    return final_cv_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                              [this] { return num_final_ > 0; });
  }

  std::vector<GenerationEvent> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  int num_final() {
    std::lock_guard<std::mutex> lock(mu_);
    return num_final_;
  }
  bool event_after_final() {
    std::lock_guard<std::mutex> lock(mu_);
    return event_after_final_;
  }
  GenerationEvent final_event() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.empty() ? GenerationEvent() : events_.back();
  }
  std::vector<int32_t> tokens() {
    std::vector<int32_t> all;
    for (const auto& e : events()) all.insert(all.end(), e.token_ids.begin(), e.token_ids.end());
    return all;
  }
  std::string text() {
    std::string all;
    for (const auto& e : events()) all += e.text;
    return all;
  }

 private:
  void on_event(GenerationEvent e) {
    std::lock_guard<std::mutex> lock(mu_);
    if (num_final_ > 0) event_after_final_ = true;
    if (e.finished) ++num_final_;
    events_.push_back(std::move(e));
    final_cv_.notify_all();
  }

  // std::mutex: visible to ThreadSanitizer (absl::Mutex from Debian is not).
  std::mutex mu_;
  std::condition_variable final_cv_;
  // Guarded by mu_:
  std::vector<GenerationEvent> events_;
  int num_final_ = 0;
  bool event_after_final_ = false;
};

struct TestEngineOptions {
  EngineOptions engine;
  int num_kv_blocks = 64;
  int block_size = 4;
  int context_length = 256;
  bool with_metrics = true;  // false: the engine gets no metrics (a server with metrics off)
  // The fake runner overlaps steps (model/runner.h). engine_overlap_test builds the engine
  // tests with FLASHSERVE_TEST_OVERLAP=1: every test of them then runs overlapped too.
  bool overlap = FLASHSERVE_TEST_OVERLAP != 0;
};

// The value of the sample line `series` (name and labels, as exposed) in a text exposition;
// fails the test and returns -1 when it is absent.
inline double metric(const std::string& text, const std::string& series) {
  size_t at = text.rfind(series + " ", 0) == 0 ? 0 : text.find("\n" + series + " ");
  if (at == std::string::npos) {
    ADD_FAILURE() << "missing " << series;
    return -1;
  }
  if (at != 0) ++at;
  const size_t begin = at + series.size() + 1;
  return std::stod(text.substr(begin, text.find('\n', begin) - begin));
}

// An engine over a FakeRunner; configure `state` before start().
class TestEngine {
 public:
  explicit TestEngine(TestEngineOptions options = {})
      : state(make_state(options)),
        options_(options),
        engine_(std::make_unique<Engine>(
            std::make_unique<FakeRunner>(state, options.num_kv_blocks, options.block_size,
                                         options.context_length),
            tokenizer, options.engine, options.with_metrics ? &metrics : nullptr)) {}

  Engine& operator*() { return *engine_; }
  Engine* operator->() { return engine_.get(); }
  Engine* get() { return engine_.get(); }
  void destroy() { engine_.reset(); }

  // Submits and returns the stream; fails the test if submit() refuses.
  std::shared_ptr<Stream> submit(GenerationRequest r, RequestId* id = nullptr) {
    auto stream = Stream::make();
    absl::StatusOr<RequestId> got = engine_->submit(std::move(r), stream->sink());
    EXPECT_TRUE(got.ok()) << got.status();
    if (id != nullptr && got.ok()) *id = *got;
    return stream;
  }

  std::shared_ptr<FakeRunnerState> state;
  FakeTokenizer tokenizer;
  metrics::Metrics metrics;

 private:
  static std::shared_ptr<FakeRunnerState> make_state(const TestEngineOptions& options) {
    auto state = std::make_shared<FakeRunnerState>();
    state->overlaps = options.overlap;
    return state;
  }

  TestEngineOptions options_;
  std::unique_ptr<Engine> engine_;
};

inline GenerationRequest greedy_request(std::vector<int32_t> prompt, int max_new_tokens) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  r.sampling.temperature = 0;
  return r;
}

// A prompt of `len` letters that differs per `seed`; its first token is letter 'a' + seed%26.
inline std::vector<int32_t> make_prompt(int seed, int len) {
  std::vector<int32_t> p;
  for (int i = 0; i < len; ++i) {
    p.push_back(i == 0 ? letter('a' + seed % 26) : kFirstLetter + (seed * 7 + i * 3) % 26);
  }
  return p;
}

// What greedy decoding of the fake model yields (no stop conditions but max_new_tokens and
// end-of-generation).
inline std::vector<int32_t> reference_greedy(const FakeRunnerState& state,
                                             std::vector<int32_t> prompt, int max_new_tokens) {
  std::vector<int32_t> out;
  for (int i = 0; i < max_new_tokens; ++i) {
    const int32_t t = state.next_token(prompt);
    out.push_back(t);
    prompt.push_back(t);
    if (t == kEos || t == kEndOfTurn) break;
  }
  return out;
}

// A scripted model: after the prompt of `prompt_len` tokens it emits `script` (then 'z's).
inline std::function<int32_t(std::span<const int32_t>)> scripted(size_t prompt_len,
                                                                  std::vector<int32_t> script) {
  return [prompt_len, script](std::span<const int32_t> context) {
    const size_t i = context.size() - prompt_len;
    return i < script.size() ? script[i] : letter('z');
  };
}

}  // namespace flashserve::engine::fakes
