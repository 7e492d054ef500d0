// The engine loop with a fake runner: outputs, stop conditions, cancellation at every stage,
// deadlines, admission errors, runner errors and shutdown. Batching, preemption and metrics:
// engine_batching_test.cc.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <new>
#include <thread>

#include "gtest/gtest.h"
#include "model/text/utf8.h"
#include "tests/support/engine_test_util.h"
#include "tests/support/manual_clock.h"
#include "tests/support/notification.h"

namespace flashserve::engine {
namespace {

using namespace ::flashserve::engine::fakes;  // NOLINT: fakes and helpers
using ::flashserve::testing::ManualClock;
using ::flashserve::testing::Notification;

void expect_one_final(Stream& s) {
  EXPECT_EQ(s.num_final(), 1);
  EXPECT_FALSE(s.event_after_final());
}

TEST(EngineTest, GreedyOutputIsTheModelsOutput) {
  TestEngine e;
  e->start();
  const std::vector<int32_t> prompt = make_prompt(3, 9);
  auto s = e.submit(greedy_request(prompt, 12));
  ASSERT_TRUE(s->wait_final());
  expect_one_final(*s);
  const GenerationEvent fin = s->final_event();
  EXPECT_EQ(fin.finish_reason, FinishReason::kLength);
  EXPECT_TRUE(fin.status.ok());
  EXPECT_EQ(fin.usage.prompt_tokens, 9);
  EXPECT_EQ(fin.usage.completion_tokens, 12);
  const std::vector<int32_t> expected = reference_greedy(*e.state, prompt, 12);
  EXPECT_EQ(s->tokens(), expected);
  EXPECT_EQ(s->text(), e.tokenizer.decode(expected, true));
  EXPECT_GE(fin.timings.total_seconds, fin.timings.time_to_first_token);
  EXPECT_GE(fin.timings.time_to_first_token, fin.timings.queue_seconds);
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
}

TEST(EngineTest, EndOfGenerationStopsUnlessIgnored) {
  for (bool ignore_eos : {false, true}) {
    TestEngine e;
    const std::vector<int32_t> prompt = make_prompt(1, 4);
    e.state->next_token = scripted(prompt.size(), {letter('h'), letter('i'), kEos, letter('x')});
    e->start();
    GenerationRequest r = greedy_request(prompt, 5);
    r.ignore_eos = ignore_eos;
    auto s = e.submit(r);
    ASSERT_TRUE(s->wait_final());
    expect_one_final(*s);
    if (ignore_eos) {
      EXPECT_EQ(s->final_event().finish_reason, FinishReason::kLength);
      EXPECT_EQ(s->text(), "hixz");
      EXPECT_EQ(s->tokens().size(), 5u);
    } else {
      EXPECT_EQ(s->final_event().finish_reason, FinishReason::kStop);
      EXPECT_EQ(s->text(), "hi");
      EXPECT_EQ(s->tokens(), (std::vector<int32_t>{letter('h'), letter('i'), kEos}));
      EXPECT_EQ(s->final_event().usage.completion_tokens, 3);
    }
  }
}

// A penalty reads the whole token history: every step's spec lists each distinct token of the
// prompt and of the tokens generated before it. (With a runner that overlaps steps the engine
// therefore takes a penalized request's token before it builds the next batch: no token of it
// is fed from the device.)
TEST(EngineTest, PenaltiesSeeTheWholeHistory) {
  TestEngine e;
  e->start();
  const std::vector<int32_t> prompt = make_prompt(4, 6);
  GenerationRequest r = greedy_request(prompt, 10);
  r.sampling.repetition_penalty = 1.5f;
  r.sampling.frequency_penalty = 0.5f;
  auto s = e.submit(r);
  ASSERT_TRUE(s->wait_final());
  const std::vector<int32_t> out = s->tokens();
  ASSERT_EQ(out.size(), 10u);
  const std::vector<model::ForwardBatch> batches = e.state->batches_copy();
  ASSERT_EQ(batches.size(), 10u);
  for (size_t k = 0; k < batches.size(); ++k) {
    const model::ForwardBatch& b = batches[k];
    ASSERT_EQ(b.sample_specs.size(), 1u);
    EXPECT_TRUE(std::none_of(b.previous_samples.begin(), b.previous_samples.end(),
                             [](int32_t i) { return i >= 0; }))
        << "step " << k;
    std::vector<int32_t> history = prompt;
    history.insert(history.end(), out.begin(), out.begin() + k);
    std::sort(history.begin(), history.end());
    history.erase(std::unique(history.begin(), history.end()), history.end());
    std::vector<int32_t> listed(b.penalty_tokens.begin() + b.sample_specs[0].penalty_begin,
                                b.penalty_tokens.begin() + b.sample_specs[0].penalty_end);
    std::sort(listed.begin(), listed.end());
    EXPECT_EQ(listed, history) << "step " << k;
  }
}

TEST(EngineTest, StopTokenIdsStop) {
  TestEngine e;
  const std::vector<int32_t> prompt = make_prompt(2, 3);
  e.state->next_token = scripted(prompt.size(), {letter('o'), letter('k'), letter('q')});
  e->start();
  GenerationRequest r = greedy_request(prompt, 10);
  r.stop_token_ids = {letter('q')};
  auto s = e.submit(r);
  ASSERT_TRUE(s->wait_final());
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kStop);
  EXPECT_EQ(s->text(), "ok");
}

TEST(EngineTest, StopStringsAreWithheldAndNeverSplitAcrossEvents) {
  TestEngine e;
  const std::vector<int32_t> prompt = make_prompt(4, 5);
  // "a" "b" "ST" "OP" "c": the stop string "STOP" spans two tokens.
  e.state->next_token =
      scripted(prompt.size(), {letter('a'), letter('b'), kSt, kOp, letter('c')});
  e->start();
  GenerationRequest r = greedy_request(prompt, 10);
  r.stop_strings = {"STOP", "never"};
  auto s = e.submit(r);
  ASSERT_TRUE(s->wait_final());
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kStopSequence);
  EXPECT_EQ(s->text(), "ab");
  for (const auto& ev : s->events()) {
    EXPECT_EQ(ev.text.find('S'), std::string::npos) << "stop string leaked: " << ev.text;
  }
  EXPECT_EQ(s->tokens(), (std::vector<int32_t>{letter('a'), letter('b'), kSt, kOp}));
}

TEST(EngineTest, TextHeldForAPossibleStopStringIsReleasedInOneEvent) {
  TestEngine e;
  const std::vector<int32_t> prompt = make_prompt(5, 5);
  e.state->next_token = scripted(prompt.size(), {letter('a'), kSt, kOp, letter('b')});
  e->start();
  GenerationRequest r = greedy_request(prompt, 4);
  r.stop_strings = {"STX"};
  auto s = e.submit(r);
  ASSERT_TRUE(s->wait_final());
  std::vector<std::string> texts;
  for (const auto& ev : s->events()) texts.push_back(ev.text);
  // "ST" is held (it could start "STX"); "OP" settles it: "STOP" goes out in one event
  // carrying both tokens.
  EXPECT_EQ(texts, (std::vector<std::string>{"a", "STOP", "b"}));
  const auto events = s->events();
  EXPECT_EQ(events[1].token_ids, (std::vector<int32_t>{kSt, kOp}));
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kLength);
}

TEST(EngineTest, MultiByteCharactersAreNeverSplitAcrossEvents) {
  TestEngine e;
  const std::vector<int32_t> prompt = make_prompt(6, 2);
  e.state->next_token = scripted(
      prompt.size(), {letter('a'), kEAcuteLead, kEAcuteTail, kEuroLead, kEuroTail});
  e->start();
  auto s = e.submit(greedy_request(prompt, 5));
  ASSERT_TRUE(s->wait_final());
  for (const auto& ev : s->events()) {
    EXPECT_EQ(model::sanitize_utf8(ev.text), ev.text) << "broken UTF-8 in an event";
  }
  EXPECT_EQ(s->text(), "a\xC3\xA9\xE2\x82\xAC");
  EXPECT_EQ(s->tokens().size(), 5u);
}

TEST(EngineTest, LogprobsAreParallelToTokens) {
  TestEngine e;
  e->start();
  GenerationRequest r = greedy_request(make_prompt(7, 6), 4);
  r.logprobs = true;
  r.sampling.num_logprobs = 3;
  auto s = e.submit(r);
  ASSERT_TRUE(s->wait_final());
  for (const auto& ev : s->events()) {
    ASSERT_EQ(ev.logprobs.size(), ev.token_ids.size());
    for (size_t i = 0; i < ev.token_ids.size(); ++i) {
      EXPECT_EQ(ev.logprobs[i].token, ev.token_ids[i]);
      EXPECT_LE(ev.logprobs[i].logprob, 0.f);
      ASSERT_EQ(ev.logprobs[i].top.size(), 3u);
      EXPECT_EQ(ev.logprobs[i].top[0].first, ev.token_ids[i]);  // greedy: the best one
    }
  }
  // Without asking, none.
  auto plain = e.submit(greedy_request(make_prompt(7, 6), 4));
  ASSERT_TRUE(plain->wait_final());
  for (const auto& ev : plain->events()) EXPECT_TRUE(ev.logprobs.empty());
}

TEST(EngineTest, InvalidRequestsAreRejectedNamingTheProblem) {
  TestEngine e({.engine = {}, .num_kv_blocks = 8, .block_size = 4, .context_length = 64});
  auto code_of = [&](GenerationRequest r) {
    return e->submit(std::move(r), Stream::make()->sink()).status();
  };
  absl::Status s = code_of(greedy_request({}, 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt_tokens"), std::string::npos) << s;
  s = code_of(greedy_request({letter('a'), kFakeVocab}, 4));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt_tokens[1] = 48"), std::string::npos) << s;
  EXPECT_EQ(code_of(greedy_request({-1}, 4)).code(), absl::StatusCode::kInvalidArgument);
  s = code_of(greedy_request({letter('a')}, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_new_tokens"), std::string::npos) << s;
  s = code_of(greedy_request(make_prompt(0, 60), 5));  // 65 > 64
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("context length 64"), std::string::npos) << s;
  GenerationRequest bad_sampling = greedy_request({letter('a')}, 4);
  bad_sampling.sampling.temperature = -1;
  EXPECT_EQ(code_of(bad_sampling).code(), absl::StatusCode::kInvalidArgument);
  // Fits the context (64) but never the KV cache (8 blocks x 4 = 32 tokens).
  s = code_of(greedy_request(make_prompt(0, 30), 10));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("KV"), std::string::npos) << s;
  // The largest request that fits: 32 cached tokens (the last sampled one is never cached).
  EXPECT_TRUE(code_of(greedy_request(make_prompt(0, 30), 3)).ok());
}

TEST(EngineTest, FullQueueIsResourceExhaustedAtOnce) {
  TestEngine e({.engine = {.max_waiting = 2}});
  auto a = e.submit(greedy_request(make_prompt(1, 3), 2));
  auto b = e.submit(greedy_request(make_prompt(2, 3), 2));
  auto c = Stream::make();
  absl::StatusOr<RequestId> refused = e->submit(greedy_request(make_prompt(3, 3), 2), c->sink());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("max_waiting 2"), std::string::npos)
      << refused.status();
  EXPECT_EQ(e->snapshot().num_waiting, 2);
  e->start();
  ASSERT_TRUE(a->wait_final());
  ASSERT_TRUE(b->wait_final());
  EXPECT_EQ(c->events().size(), 0u);  // a refused request gets no events
  // Room again.
  auto d = e.submit(greedy_request(make_prompt(4, 3), 2));
  ASSERT_TRUE(d->wait_final());
  EXPECT_EQ(d->final_event().finish_reason, FinishReason::kLength);
}

TEST(EngineTest, CancelWhileWaiting) {
  TestEngine e;
  RequestId id = 0;
  auto s = e.submit(greedy_request(make_prompt(1, 5), 4), &id);
  e->cancel(id);
  e->start();
  ASSERT_TRUE(s->wait_final());
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(s->final_event().usage.completion_tokens, 0);
  EXPECT_EQ(e.state->calls(), 0);  // never reached the model
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
}

TEST(EngineTest, CancelMidPrefill) {
  // A 40-token prompt under a 16-token budget takes three steps; cancel during the first.
  TestEngine e({.engine = {.max_batch_tokens = 16}});
  RequestId id = 0;
  auto s = e.submit(greedy_request(make_prompt(1, 40), 4), &id);
  Engine* engine = e.get();
  e.state->on_forward = [engine, &id](const model::ForwardBatch&) { engine->cancel(id); };
  e->start();
  ASSERT_TRUE(s->wait_final());
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(s->final_event().usage.completion_tokens, 0);
  EXPECT_EQ(e.state->calls(), 1);
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
}

TEST(EngineTest, CancelWhileDecoding) {
  TestEngine e;
  Engine* engine = e.get();
  std::atomic<RequestId> id{0};
  std::atomic<bool> cancelled{false};
  std::atomic<int> num_forwards{0};
  // Steps after the first wait for the cancel, so the request is still decoding when it
  // lands (events reach the sink on the delivery thread, while the engine runs on).
  e.state->on_forward = [&](const model::ForwardBatch&) {
    if (num_forwards++ == 0) return;
    for (int i = 0; i < 10000 && !cancelled; ++i) std::this_thread::sleep_for(std::chrono::microseconds(100));
  };
  auto s = Stream::make();
  absl::StatusOr<RequestId> got = e->submit(
      greedy_request(make_prompt(1, 5), 50),
      s->sink([engine, &id, &cancelled](const GenerationEvent& ev) {
        if (!ev.finished && !cancelled) {
          engine->cancel(id.load());
          cancelled = true;
        }
      }));
  ASSERT_TRUE(got.ok());
  id = *got;
  e->start();
  ASSERT_TRUE(s->wait_final());
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kCancelled);
  // The cancel is taken at the start of a step: the step under way when it landed may add
  // one token.
  EXPECT_GE(s->final_event().usage.completion_tokens, 1);
  EXPECT_LE(s->final_event().usage.completion_tokens, 2);
  EXPECT_EQ(s->tokens().size(), static_cast<size_t>(s->final_event().usage.completion_tokens));
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
}

TEST(EngineTest, CancelAfterFinishIsIgnored) {
  TestEngine e;
  e->start();
  RequestId id = 0;
  auto s = e.submit(greedy_request(make_prompt(1, 5), 3), &id);
  ASSERT_TRUE(s->wait_final());
  e->cancel(id);
  e->cancel(id + 1000);  // unknown
  auto t = e.submit(greedy_request(make_prompt(2, 5), 3));  // the engine went past the cancels
  ASSERT_TRUE(t->wait_final());
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kLength);
  EXPECT_EQ(t->final_event().finish_reason, FinishReason::kLength);
}

TEST(EngineTest, DeadlineAlreadyPassedAbortsAtTheNextStep) {
  ManualClock clock;
  TestEngine e({.engine = {.clock = &clock}});
  GenerationRequest r = greedy_request(make_prompt(1, 5), 4);
  r.deadline = clock.now();
  auto s = e.submit(r);
  e->start();
  ASSERT_TRUE(s->wait_final());
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kDeadlineExceeded);
  EXPECT_EQ(e.state->calls(), 0);
}

// gRPC cancels a call whose deadline expired; that cancellation usually reaches the engine
// before the engine's own deadline check. It is a deadline expiry, not a cancellation, in the
// final event and in flashserve_requests_total.
TEST(EngineTest, CancelAfterTheDeadlineCountsAsDeadlineExceeded) {
  ManualClock clock;
  TestEngine e({.engine = {.clock = &clock}});
  GenerationRequest r = greedy_request(make_prompt(1, 5), 4);
  r.deadline = clock.now() - std::chrono::milliseconds(1);
  RequestId id = 0;
  auto s = e.submit(r, &id);
  e->cancel(id);  // taken with the submission, before the first step's deadline check
  auto plain = e.submit(greedy_request(make_prompt(2, 5), 4), &id);
  e->cancel(id);  // no deadline: a cancellation
  e->start();
  ASSERT_TRUE(s->wait_final());
  ASSERT_TRUE(plain->wait_final());
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kDeadlineExceeded);
  EXPECT_EQ(plain->final_event().finish_reason, FinishReason::kCancelled);
  const std::string t = e.metrics.serialize();
  EXPECT_NE(t.find("flashserve_requests_total{api=\"grpc\",status=\"deadline_exceeded\"} 1\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("flashserve_requests_total{api=\"grpc\",status=\"cancelled\"} 1\n"), std::string::npos)
      << t;
}

// Every forward pass takes 2 ms of the manual clock: steps start at 0, 2, 4, ... ms, and the
// step starting at the 40 ms deadline aborts the request after 20 tokens — 19 when the runner
// overlaps steps: the 20th token is still in flight when that step aborts the request, and
// goes with it.
TEST(EngineTest, DeadlineDuringGeneration) {
  ManualClock clock;
  TestEngine e({.engine = {.clock = &clock}});
  e.state->on_forward = [&clock](const model::ForwardBatch&) {
    clock.advance(std::chrono::milliseconds(2));
  };
  e->start();
  GenerationRequest r = greedy_request(make_prompt(1, 5), 240);
  r.deadline = clock.now() + std::chrono::milliseconds(40);
  auto s = e.submit(r);
  ASSERT_TRUE(s->wait_final());
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kDeadlineExceeded);
  EXPECT_EQ(s->final_event().usage.completion_tokens, e.state->overlaps ? 19 : 20);
  EXPECT_EQ(s->tokens().size(), e.state->overlaps ? 19u : 20u);
  EXPECT_DOUBLE_EQ(s->final_event().timings.total_seconds, 0.040);
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
}

TEST(EngineTest, DeadlineWhileWaitingBehindAFullBatch) {
  ManualClock clock;
  TestEngine e({.engine = {.max_num_seqs = 1, .clock = &clock}});
  e.state->on_forward = [&clock](const model::ForwardBatch&) {
    clock.advance(std::chrono::milliseconds(2));
  };
  auto running = e.submit(greedy_request(make_prompt(1, 5), 60));  // 120 ms of steps
  GenerationRequest r = greedy_request(make_prompt(2, 5), 4);
  r.deadline = clock.now() + std::chrono::milliseconds(20);
  auto waiting = e.submit(r);
  e->start();
  ASSERT_TRUE(waiting->wait_final());
  expect_one_final(*waiting);
  EXPECT_EQ(waiting->final_event().finish_reason, FinishReason::kDeadlineExceeded);
  EXPECT_EQ(waiting->final_event().usage.completion_tokens, 0);
  // Never scheduled: its queue time is its whole life, up to the step at its deadline.
  EXPECT_EQ(waiting->final_event().timings.queue_seconds,
            waiting->final_event().timings.total_seconds);
  EXPECT_DOUBLE_EQ(waiting->final_event().timings.total_seconds, 0.020);
  ASSERT_TRUE(running->wait_final());
  EXPECT_EQ(running->final_event().finish_reason, FinishReason::kLength);
  for (const auto& b : e.state->batches_copy()) EXPECT_EQ(b.num_seqs(), 1);
}

// Issue 23: an allocation that fails inside a step (here the runner's) is a failed step with
// RESOURCE_EXHAUSTED, handled like any runner error, not an exception that ends the process.
TEST(EngineTest, OutOfMemoryInAStepIsARunnerError) {
  std::mutex reported_mu;
  std::vector<absl::Status> reported;
  TestEngine e({.engine = {.on_runner_failure = [&](const absl::Status& error) {
    std::lock_guard<std::mutex> lock(reported_mu);
    reported.push_back(error);
  }}});
  std::atomic<int> num_forwards{0};
  e.state->on_forward = [&](const model::ForwardBatch&) {
    if (++num_forwards == 2) throw std::bad_alloc();
  };
  auto s = e.submit(greedy_request(make_prompt(1, 5), 4));
  e->start();
  ASSERT_TRUE(s->wait_final());
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kError);
  EXPECT_EQ(s->final_event().status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s->final_event().status.message().find("out of memory during an engine step"),
            std::string::npos)
      << s->final_event().status;
  EXPECT_EQ(e->snapshot().num_kv_blocks_used, 0);
  std::lock_guard<std::mutex> lock(reported_mu);
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_EQ(reported[0].code(), absl::StatusCode::kResourceExhausted);
}

// Issue 10 (GPU faults): a failed forward pass leaves the device in an unknown state, so the
// engine stops serving. The failed step's requests get INTERNAL naming the runner's error,
// the request still waiting gets UNAVAILABLE, later submits are refused the same way, and the
// snapshot says why (health turns NOT_SERVING on it).
TEST(EngineTest, RunnerErrorFailsEveryRequestAndTheEngineStopsServing) {
  std::mutex reported_mu;
  std::vector<absl::Status> reported;  // on_runner_failure runs on the engine thread
  TestEngine e({.engine = {.max_num_seqs = 2,
                           .on_runner_failure = [&](const absl::Status& error) {
                             std::lock_guard<std::mutex> lock(reported_mu);
                             reported.push_back(error);
                           }}});
  e.state->fail_on_call = 2;
  auto a = e.submit(greedy_request(make_prompt(1, 5), 4));
  auto b = e.submit(greedy_request(make_prompt(2, 5), 4));
  auto waiting = e.submit(greedy_request(make_prompt(3, 5), 4));  // no room: max_num_seqs 2
  e->start();
  for (auto* s : {a.get(), b.get(), waiting.get()}) ASSERT_TRUE(s->wait_final());
  for (auto* s : {a.get(), b.get()}) {
    expect_one_final(*s);
    const GenerationEvent last = s->final_event();
    EXPECT_EQ(last.finish_reason, FinishReason::kError);
    EXPECT_EQ(last.status.code(), absl::StatusCode::kInternal) << last.status;
    EXPECT_NE(last.status.message().find("the model runner failed: INTERNAL: fake runner: "
                                         "injected failure"),
              std::string::npos)
        << last.status;
    // From the first step; when the runner overlaps steps, that token was still in flight
    // when the second launch failed, and the failed runner's tokens are not taken.
    EXPECT_EQ(last.usage.completion_tokens, e.state->overlaps ? 0 : 1);
    EXPECT_EQ(s->tokens().size(), e.state->overlaps ? 0u : 1u);
  }
  expect_one_final(*waiting);
  EXPECT_EQ(waiting->final_event().finish_reason, FinishReason::kError);
  EXPECT_EQ(waiting->final_event().status.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(waiting->final_event().status.message().find("injected failure"), std::string::npos)
      << waiting->final_event().status;
  EXPECT_EQ(waiting->final_event().usage.completion_tokens, 0);

  const EngineSnapshot snapshot = e->snapshot();
  EXPECT_EQ(snapshot.failure.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(snapshot.failure.message().find("injected failure"), std::string::npos);
  EXPECT_EQ(snapshot.num_running + snapshot.num_waiting, 0);
  EXPECT_EQ(snapshot.num_kv_blocks_used, 0);
  EXPECT_FALSE(snapshot.stalled);
  // Nothing new runs on the failed runner.
  absl::StatusOr<RequestId> late =
      e->submit(greedy_request(make_prompt(4, 5), 4), Stream::make()->sink());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(late.status(), snapshot.failure);
  EXPECT_EQ(e.state->calls(), 2);
  {
    std::lock_guard<std::mutex> lock(reported_mu);
    ASSERT_EQ(reported.size(), 1u);
    EXPECT_EQ(reported[0], e.state->failure);
  }
  // Counted by the status the client sees: internal (the failed step's two), unavailable
  // (the waiting one and the refused submit).
  const std::string metrics = e.metrics.serialize();
  EXPECT_NE(metrics.find("flashserve_requests_total{api=\"grpc\",status=\"internal\"} 2\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("flashserve_requests_total{api=\"grpc\",status=\"unavailable\"} 2\n"),
            std::string::npos)
      << metrics;
  EXPECT_TRUE(e->drain(std::chrono::seconds(10)));
}

TEST(EngineTest, DestroyingTheEngineFinishesEveryRequestOnce) {
  std::vector<std::shared_ptr<Stream>> streams;
  {
    TestEngine e;
    Notification ran_a_step;
    e.state->on_forward = [&ran_a_step](const model::ForwardBatch&) {
      if (!ran_a_step.notified()) ran_a_step.notify();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    for (int i = 0; i < 10; ++i) streams.push_back(e.submit(greedy_request(make_prompt(i, 5), 200)));
    e->start();
    ran_a_step.wait();
    e.destroy();
  }
  for (auto& s : streams) {
    expect_one_final(*s);
    EXPECT_EQ(s->final_event().finish_reason, FinishReason::kCancelled);
  }
}

TEST(EngineTest, DestroyingAnEngineNeverStartedFinishesQueuedRequests) {
  std::shared_ptr<Stream> s;
  {
    TestEngine e;
    s = e.submit(greedy_request(make_prompt(1, 5), 4));
  }
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kCancelled);
}

TEST(EngineTest, DrainFinishesTheWorkThenRefusesNewRequests) {
  TestEngine e({.engine = {.max_num_seqs = 2}});
  std::vector<std::shared_ptr<Stream>> streams;
  for (int i = 0; i < 5; ++i) streams.push_back(e.submit(greedy_request(make_prompt(i, 5), 6)));
  e->start();
  EXPECT_TRUE(e->snapshot().running);
  e->drain();
  for (auto& s : streams) {
    expect_one_final(*s);
    EXPECT_EQ(s->final_event().finish_reason, FinishReason::kLength);
  }
  EXPECT_FALSE(e->snapshot().running);
  absl::StatusOr<RequestId> late = e->submit(greedy_request(make_prompt(9, 5), 6),
                                             Stream::make()->sink());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
}

// Issue 10 defect 6: drain has a hard limit. Work still running or waiting when it passes
// finishes with an Unavailable status that says why, and drain() returns.
TEST(EngineTest, DrainLimitFailsWhatRemainsWithUnavailable) {
  TestEngine e({.engine = {.max_num_seqs = 1}});
  // Every step takes 20 ms: 3 requests x 50 tokens would take ~3 s without the limit.
  e.state->on_forward = [](const model::ForwardBatch&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  std::vector<std::shared_ptr<Stream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(e.submit(greedy_request(make_prompt(i, 5), 50)));
  e->start();
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_FALSE(e->drain(std::chrono::milliseconds(200)));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(2));
  for (auto& s : streams) {
    expect_one_final(*s);
    const GenerationEvent last = s->final_event();
    EXPECT_EQ(last.finish_reason, FinishReason::kError);
    EXPECT_EQ(last.status.code(), absl::StatusCode::kUnavailable) << last.status;
    EXPECT_NE(last.status.message().find("drain limit of 200ms"), std::string::npos)
        << last.status;
  }
  const EngineSnapshot snapshot = e->snapshot();
  EXPECT_EQ(snapshot.num_running + snapshot.num_waiting, 0);
  EXPECT_EQ(snapshot.num_kv_blocks_used, 0);
}

TEST(EngineTest, DrainWithinItsLimitReportsSuccess) {
  TestEngine e;
  auto s = e.submit(greedy_request(make_prompt(1, 5), 3));
  e->start();
  EXPECT_TRUE(e->drain(std::chrono::seconds(60)));
  expect_one_final(*s);
  EXPECT_EQ(s->final_event().finish_reason, FinishReason::kLength);
}

TEST(EngineTest, StallIsReportedWhileAStepHangs) {
  ManualClock clock;
  TestEngine e({.engine = {.stall_threshold = std::chrono::milliseconds(20), .clock = &clock}});
  Notification in_step, release;
  e.state->on_forward = [&](const model::ForwardBatch&) {
    if (!in_step.notified()) in_step.notify();
    release.wait();
  };
  e->start();
  clock.advance(std::chrono::seconds(1));
  EXPECT_FALSE(e->snapshot().stalled);  // idle is not stalled, however long
  auto s = e.submit(greedy_request(make_prompt(1, 5), 2));
  in_step.wait();
  clock.advance(std::chrono::milliseconds(20));
  EXPECT_FALSE(e->snapshot().stalled);  // not past the threshold yet
  clock.advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(e->snapshot().stalled);
  release.notify();
  ASSERT_TRUE(s->wait_final());
  EXPECT_FALSE(e->snapshot().stalled);
  EXPECT_EQ(e->snapshot().num_steps, 2u);
}

}  // namespace
}  // namespace flashserve::engine
