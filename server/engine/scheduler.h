#pragma once
// Iteration-level (continuous) batching with chunked prefill.
//
// Every step, under a budget of max_batch_tokens query tokens and max_num_seqs sequences:
//  1. running sequences, oldest first, get their uncomputed tokens — one decode token, or the
//     next chunk of a prefill that did not fit in earlier steps;
//  2. if no sequence had to be preempted, waiting sequences are admitted strictly FIFO (a
//     head that does not fit blocks the ones behind it), each with as much of its prompt as
//     the remaining token budget allows.
// An admitted sequence first shares the KV blocks of its longest prefix already in the prefix
// cache (block_manager.h) and computes only the rest; full blocks are registered in the cache
// as soon as their tokens are computed. KV blocks are allocated on demand for exactly the
// tokens scheduled. When the cache runs
// out, the youngest running sequence is preempted by recompute: its blocks are freed and it
// returns to the front of the waiting queue, to be prefilled again (prompt + generated).
// A final sequence (Sequence::is_final: its pending last token ends it) is neither scheduled
// nor preempted; it keeps its blocks until the engine finishes it.
//
// Thread-safety: none; the engine thread owns it. Sequences are owned by the caller and must
// stay alive until finish() (or until they were never added).
#include <deque>
#include <vector>

#include "server/engine/block_manager.h"
#include "server/engine/sequence.h"

namespace flashserve::engine {

struct SchedulerOptions {
  int max_num_seqs = 64;        // >= 1
  int max_batch_tokens = 2048;  // >= 1
};

struct ScheduledSequence {
  Sequence* seq = nullptr;
  // Query tokens this step: positions [num_computed_tokens, num_computed_tokens + n) of
  // seq->tokens(), with num_computed_tokens read before complete().
  int num_new_tokens = 0;
  // True when these are the sequence's last uncomputed tokens, so the forward pass's logits
  // for it predict its next token (false for an intermediate prefill chunk).
  bool samples = false;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> scheduled;  // batch order
  std::vector<Sequence*> preempted;          // sent back to waiting by this step
  int num_tokens = 0;                        // sum of num_new_tokens
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  // `blocks` must outlive the scheduler.
  Scheduler(SchedulerOptions options, BlockManager* blocks);

  // Appends a new sequence to the waiting queue.
  // REQUIRES: seq->status() == kWaiting, no blocks, not already added.
  void add(Sequence* seq);

  // Picks this step's batch and allocates its KV blocks (see the file comment).
  SchedulerOutput schedule();

  // Records that the forward pass of `output` ran: the scheduled tokens are now cached, and
  // blocks they filled are registered in the prefix cache.
  void complete(const SchedulerOutput& output);

  // Removes `seq` (waiting or running), frees its blocks and marks it finished. No-op for a
  // sequence that is already finished.
  void finish(Sequence* seq);

  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int num_running() const { return static_cast<int>(running_.size()); }
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::deque<Sequence*>& running() const { return running_; }

 private:
  void schedule_running(int* token_budget, SchedulerOutput* out);
  void admit_waiting(int* token_budget, SchedulerOutput* out);
  // Preempts the youngest running sequence that is not final (Sequence::is_final); returns
  // it. REQUIRES: one exists (schedule_running's sequence is one).
  Sequence* preempt_youngest(SchedulerOutput* out);
  void push_scheduled(Sequence* seq, int num_new_tokens, int* token_budget,
                      SchedulerOutput* out);

  SchedulerOptions options_;
  BlockManager* blocks_;
  std::deque<Sequence*> waiting_;  // FIFO; preempted sequences go back to the front
  std::deque<Sequence*> running_;  // admission order: oldest first
};

}  // namespace flashserve::engine
