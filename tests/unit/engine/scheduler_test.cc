#include "server/engine/scheduler.h"

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace flashserve::engine {
namespace {

std::unique_ptr<Sequence> make_seq(uint64_t id, int num_prompt_tokens) {
  std::vector<int32_t> prompt(num_prompt_tokens);
  for (int i = 0; i < num_prompt_tokens; ++i) prompt[i] = static_cast<int32_t>(id * 1000 + i);
  return std::make_unique<Sequence>(id, std::move(prompt), Sequence::Clock::now());
}

std::vector<uint64_t> ids_of(const SchedulerOutput& out) {
  std::vector<uint64_t> ids;
  for (const auto& s : out.scheduled) ids.push_back(s.seq->id());
  return ids;
}

// What the engine does after a successful forward pass: tokens are cached, and sequences
// whose logits were sampled get a new token.
void run_step(Scheduler& sched, const SchedulerOutput& out) {
  sched.complete(out);
  for (const auto& s : out.scheduled) {
    if (s.samples) s.seq->append_token(7);
  }
}

TEST(SchedulerTest, AdmitsFifoUnderMaxNumSeqs) {
  BlockManager bm(100, 4);
  Scheduler sched({.max_num_seqs = 3, .max_batch_tokens = 1000}, &bm);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (uint64_t id = 1; id <= 5; ++id) {
    seqs.push_back(make_seq(id, 5));
    sched.add(seqs.back().get());
  }
  SchedulerOutput out = sched.schedule();
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(out.num_tokens, 15);
  for (const auto& s : out.scheduled) {
    EXPECT_EQ(s.num_new_tokens, 5);
    EXPECT_TRUE(s.samples);
    EXPECT_EQ(s.seq->status(), SequenceStatus::kRunning);
    EXPECT_EQ(s.seq->block_table().size(), 2u);
  }
  EXPECT_EQ(sched.num_running(), 3);
  EXPECT_EQ(sched.num_waiting(), 2);
  run_step(sched, out);

  sched.finish(seqs[1].get());  // request 2 leaves: room for request 4, not 5
  EXPECT_EQ(seqs[1]->status(), SequenceStatus::kFinished);
  EXPECT_TRUE(seqs[1]->block_table().empty());
  out = sched.schedule();
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);  // decodes first
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 1);
  EXPECT_EQ(out.scheduled[2].num_new_tokens, 5);  // then the new prompt
  EXPECT_EQ(out.num_tokens, 7);
}

TEST(SchedulerTest, ChunksPrefillUnderTheTokenBudget) {
  BlockManager bm(100, 4);
  Scheduler sched({.max_num_seqs = 8, .max_batch_tokens = 10}, &bm);
  auto a = make_seq(1, 7);
  auto b = make_seq(2, 12);
  auto c = make_seq(3, 2);
  sched.add(a.get());
  sched.add(b.get());
  sched.add(c.get());

  SchedulerOutput out = sched.schedule();  // a: 7 (whole), b: first 3
  ASSERT_EQ(ids_of(out), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 7);
  EXPECT_TRUE(out.scheduled[0].samples);
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 3);
  EXPECT_FALSE(out.scheduled[1].samples);
  EXPECT_EQ(b->block_table().size(), 1u);  // blocks only for the scheduled chunk
  run_step(sched, out);
  EXPECT_EQ(a->num_tokens(), 8);
  EXPECT_EQ(b->num_tokens(), 12);  // no token from an intermediate chunk
  EXPECT_EQ(b->num_computed_tokens(), 3);

  out = sched.schedule();  // a: decode 1, b: next 9 -> budget spent, c waits
  ASSERT_EQ(ids_of(out), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 9);
  EXPECT_TRUE(out.scheduled[1].samples);
  EXPECT_EQ(out.num_tokens, 10);
  EXPECT_EQ(b->block_table().size(), 3u);
  run_step(sched, out);

  out = sched.schedule();  // a, b decode; c admitted whole
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(out.num_tokens, 4);
}

TEST(SchedulerTest, WaitingHeadThatDoesNotFitBlocksTheQueue) {
  BlockManager bm(4, 4);
  Scheduler sched({.max_num_seqs = 8, .max_batch_tokens = 100}, &bm);
  auto a = make_seq(1, 9);   // 3 blocks
  auto b = make_seq(2, 8);   // 2 blocks: does not fit next to a
  auto c = make_seq(3, 1);   // 1 block: would fit, but must not overtake b
  sched.add(a.get());
  sched.add(b.get());
  sched.add(c.get());
  SchedulerOutput out = sched.schedule();
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1}));
  EXPECT_EQ(sched.num_waiting(), 2);
  EXPECT_EQ(sched.waiting().front(), b.get());
}

TEST(SchedulerTest, PreemptsTheYoungestWhenBlocksRunOut) {
  BlockManager bm(4, 4);
  Scheduler sched({.max_num_seqs = 8, .max_batch_tokens = 100}, &bm);
  auto a = make_seq(1, 8);  // exactly 2 blocks each: the first decode needs a third
  auto b = make_seq(2, 8);
  sched.add(a.get());
  sched.add(b.get());
  SchedulerOutput out = sched.schedule();
  ASSERT_EQ(ids_of(out), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(bm.num_free_blocks(), 0);
  run_step(sched, out);  // both now hold 9 tokens, 8 computed

  out = sched.schedule();  // a needs a block: b (younger) is preempted
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1}));
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], b.get());
  EXPECT_EQ(b->status(), SequenceStatus::kWaiting);
  EXPECT_EQ(b->num_computed_tokens(), 0);
  EXPECT_TRUE(b->block_table().empty());
  EXPECT_EQ(b->num_preemptions(), 1);
  EXPECT_EQ(b->num_tokens(), 9);  // the generated token is kept and recomputed
  EXPECT_EQ(sched.waiting().front(), b.get());
  EXPECT_EQ(a->block_table().size(), 3u);
  run_step(sched, out);

  sched.finish(a.get());  // b resumes: prefill of prompt + generated token
  out = sched.schedule();
  ASSERT_EQ(ids_of(out), (std::vector<uint64_t>{2}));
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 9);
  EXPECT_TRUE(out.scheduled[0].samples);
}

TEST(SchedulerTest, PreemptsItselfWhenItIsTheYoungest) {
  BlockManager bm(3, 4);
  Scheduler sched({.max_num_seqs = 8, .max_batch_tokens = 100}, &bm);
  auto a = make_seq(1, 3);  // 1 block with a free row for its first decode
  auto b = make_seq(2, 8);  // 2 full blocks: its first decode needs a third
  sched.add(a.get());
  sched.add(b.get());
  run_step(sched, sched.schedule());
  EXPECT_EQ(bm.num_free_blocks(), 0);
  SchedulerOutput out = sched.schedule();
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1}));
  EXPECT_EQ(out.preempted, (std::vector<Sequence*>{b.get()}));
  EXPECT_EQ(bm.num_used_blocks(), 1);
  run_step(sched, out);
  // b (9 tokens, 3 blocks) cannot come back while a holds a block, and is not re-admitted in
  // the step that preempted it.
  out = sched.schedule();
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(out.preempted.empty());
  sched.finish(a.get());
  out = sched.schedule();
  ASSERT_EQ(ids_of(out), (std::vector<uint64_t>{2}));
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 9);
}

TEST(SchedulerTest, PreemptedGoesFirstAndNothingIsAdmittedInThatStep) {
  BlockManager bm(4, 4);
  Scheduler sched({.max_num_seqs = 8, .max_batch_tokens = 5}, &bm);
  auto a = make_seq(1, 4);
  auto b = make_seq(2, 8);
  auto c = make_seq(3, 1);
  sched.add(a.get());
  sched.add(b.get());
  sched.add(c.get());
  run_step(sched, sched.schedule());  // a: 4 (samples), b: 1 of 8; c waits (budget)
  run_step(sched, sched.schedule());  // a: decode, b: 4 more; all 4 blocks in use
  SchedulerOutput out = sched.schedule();  // a: decode, b: last 3 (samples); c: no block
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1, 2}));
  run_step(sched, out);
  ASSERT_EQ(bm.num_free_blocks(), 0);
  // b's first decode needs a third block: b, the youngest running, preempts itself. Its two
  // blocks would take a 4-token chunk of its recompute, but a step that preempted admits
  // nothing (it would only preempt again).
  out = sched.schedule();
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1}));
  EXPECT_EQ(out.preempted, (std::vector<Sequence*>{b.get()}));
  EXPECT_EQ(std::vector<Sequence*>(sched.waiting().begin(), sched.waiting().end()),
            (std::vector<Sequence*>{b.get(), c.get()}));  // the preempted one goes first
  EXPECT_EQ(bm.num_free_blocks(), 2);
  run_step(sched, out);
  out = sched.schedule();  // next step: b resumes with a chunk
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 4);
}

// Random workload: arrivals, chunked prefills, decodes, random cancellations, tight KV cache.
// Every step's batch respects both budgets and every scheduled token has a KV slot; at the
// end every request finished with its full output and every block is free again.
TEST(SchedulerTest, RandomWorkloadRespectsBudgetsAndFreesEveryBlock) {
  int total_preempted = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    const int block_size = 1 + static_cast<int>(rng() % 8);
    const int num_blocks = 20 + static_cast<int>(rng() % 40);
    const SchedulerOptions opts{.max_num_seqs = 1 + static_cast<int>(rng() % 8),
                                .max_batch_tokens = 1 + static_cast<int>(rng() % 64)};
    BlockManager bm(num_blocks, block_size);
    Scheduler sched(opts, &bm);
    std::vector<std::unique_ptr<Sequence>> seqs;
    std::vector<int> max_new;
    int num_finished = 0, num_cancelled = 0, num_preempted = 0;
    const int num_requests = 60;
    for (int step = 0; step < 20000 && num_finished < num_requests; ++step) {
      if (static_cast<int>(seqs.size()) < num_requests && rng() % 3 == 0) {
        const int capacity = num_blocks * block_size;
        const int prompt = 1 + static_cast<int>(rng() % std::min(40, capacity / 2));
        max_new.push_back(1 + static_cast<int>(rng() % std::min(20, capacity - prompt)));
        seqs.push_back(make_seq(seqs.size(), prompt));
        sched.add(seqs.back().get());
      }
      if (rng() % 50 == 0 && !seqs.empty()) {  // cancel a random live request
        Sequence* s = seqs[rng() % seqs.size()].get();
        if (s->status() != SequenceStatus::kFinished) {
          sched.finish(s);
          ++num_finished;
          ++num_cancelled;
        }
      }
      SchedulerOutput out = sched.schedule();
      num_preempted += static_cast<int>(out.preempted.size());
      ASSERT_LE(out.num_tokens, opts.max_batch_tokens);
      ASSERT_LE(static_cast<int>(out.scheduled.size()), opts.max_num_seqs);
      ASSERT_LE(sched.num_running(), opts.max_num_seqs);
      int sum = 0;
      for (const auto& s : out.scheduled) {
        ASSERT_GT(s.num_new_tokens, 0);
        sum += s.num_new_tokens;
        const int after = s.seq->num_computed_tokens() + s.num_new_tokens;
        ASSERT_LE(after, s.seq->num_tokens());
        ASSERT_EQ(static_cast<int>(s.seq->block_table().size()), bm.num_blocks_for(after));
        ASSERT_EQ(s.samples, after == s.seq->num_tokens());
      }
      ASSERT_EQ(sum, out.num_tokens);
      if (sched.has_work()) {
        ASSERT_FALSE(out.empty()) << "no progress at step " << step;
      }
      run_step(sched, out);
      for (const auto& s : out.scheduled) {
        const size_t i = s.seq->id();
        if (s.seq->num_generated_tokens() == max_new[i]) {
          sched.finish(s.seq);
          ++num_finished;
        }
      }
      int num_held = 0;
      for (Sequence* s : sched.running()) num_held += static_cast<int>(s->block_table().size());
      ASSERT_EQ(num_held, bm.num_used_blocks());
    }
    ASSERT_EQ(num_finished, num_requests) << "seed " << seed;
    for (size_t i = 0; i < seqs.size(); ++i) {
      EXPECT_EQ(seqs[i]->status(), SequenceStatus::kFinished);
      if (seqs[i]->num_generated_tokens() != max_new[i]) --num_cancelled;  // cancelled
    }
    EXPECT_EQ(num_cancelled, 0) << "a request finished without its full output";
    EXPECT_EQ(bm.num_used_blocks(), 0) << "seed " << seed;
    EXPECT_FALSE(sched.has_work());
    total_preempted += num_preempted;
  }
  EXPECT_GT(total_preempted, 0) << "the workload never ran the cache out of blocks";
}

// A final sequence (its pending last token ends it, Sequence::is_final) runs no more steps:
// it is not scheduled, not preempted when the cache runs out, and its seat under max_num_seqs
// goes to the next waiting sequence; its blocks stay until it is finished.
TEST(SchedulerTest, FinalSequencesAreNeitherScheduledNorPreempted) {
  BlockManager bm(6, 4);  // 24 tokens
  Scheduler sched({.max_num_seqs = 2, .max_batch_tokens = 100}, &bm);
  auto a = make_seq(1, 4);
  auto b = make_seq(2, 7);
  auto c = make_seq(3, 3);
  sched.add(a.get());
  sched.add(b.get());
  sched.add(c.get());
  SchedulerOutput out = sched.schedule();
  ASSERT_EQ(ids_of(out), (std::vector<uint64_t>{1, 2}));
  sched.complete(out);
  a->append_pending_token(0);
  a->set_final();
  b->append_pending_token(1);
  EXPECT_EQ(a->num_known_generated_tokens(), 0);
  EXPECT_EQ(a->num_generated_tokens(), 1);

  out = sched.schedule();  // a sits out; c takes its seat (3 running, 2 scheduled)
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{2, 3}));
  EXPECT_TRUE(out.preempted.empty());
  EXPECT_EQ(sched.num_running(), 3);
  EXPECT_EQ(a->block_table().size(), 1u);
  sched.complete(out);
  b->resolve_pending_token(9);
  b->append_pending_token(0);
  c->append_pending_token(1);

  // 6 blocks: a 1, b 2, c 1. b grows to 20 tokens (5 blocks, 3 more, 2 free): c, the
  // youngest that is not final, is preempted; a keeps its block.
  b->resolve_pending_token(9);
  for (int i = 0; i < 11; ++i) b->append_token(9);
  out = sched.schedule();
  EXPECT_EQ(ids_of(out), (std::vector<uint64_t>{2}));
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 12);
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], c.get());
  EXPECT_EQ(a->status(), SequenceStatus::kRunning);
  EXPECT_EQ(a->block_table().size(), 1u);
  sched.finish(a.get());
  EXPECT_TRUE(a->block_table().empty());
}

}  // namespace
}  // namespace flashserve::engine
