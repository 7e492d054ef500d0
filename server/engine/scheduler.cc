#include "server/engine/scheduler.h"

#include <algorithm>
#include <cassert>

namespace flashserve::engine {

Scheduler::Scheduler(SchedulerOptions options, BlockManager* blocks)
    : options_(options), blocks_(blocks) {
  assert(options_.max_num_seqs >= 1 && options_.max_batch_tokens >= 1);
}

void Scheduler::add(Sequence* seq) {
  assert(seq->status() == SequenceStatus::kWaiting && seq->block_table().empty());
  waiting_.push_back(seq);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int token_budget = options_.max_batch_tokens;
  schedule_running(&token_budget, &out);
  // Admitting new work right after preempting would only preempt again next step.
  if (out.preempted.empty()) admit_waiting(&token_budget, &out);
  return out;
}

void Scheduler::schedule_running(int* token_budget, SchedulerOutput* out) {
  // Victims are taken from the back, so everything before index i is already scheduled and
  // keeps its blocks.
  for (size_t i = 0; i < running_.size() && *token_budget > 0;) {
    Sequence* seq = running_[i];
    if (seq->is_final()) {  // waits for the engine to finish it
      ++i;
      continue;
    }
    assert(seq->num_uncomputed_tokens() > 0);
    const int n = std::min(seq->num_uncomputed_tokens(), *token_budget);
    const int num_tokens_after = seq->num_computed_tokens() + n;
    bool preempted_self = false;
    while (!blocks_->can_allocate(seq->block_table(), num_tokens_after)) {
      Sequence* victim = preempt_youngest(out);  // `seq` itself at the latest
      preempted_self = victim == seq;
      if (preempted_self) break;
    }
    if (preempted_self) break;
    blocks_->allocate(seq->mutable_block_table(), num_tokens_after);
    push_scheduled(seq, n, token_budget, out);
    ++i;
  }
}

void Scheduler::admit_waiting(int* token_budget, SchedulerOutput* out) {
  // A final sequence runs no more steps: its seat goes to the next waiting one already (the
  // batch stays within max_num_seqs; its blocks count until it is finished).
  const int num_final = static_cast<int>(
      std::count_if(running_.begin(), running_.end(), [](Sequence* s) { return s->is_final(); }));
  while (!waiting_.empty() && *token_budget > 0 &&
         num_running() - num_final < options_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    assert(seq->num_computed_tokens() == 0 && seq->block_table().empty());
    const PrefixMatch match = blocks_->find_prefix(seq->tokens(), seq->mutable_block_hashes());
    const int num_cached = match.num_tokens(blocks_->block_size());
    const int n = std::min(seq->num_tokens() - num_cached, *token_budget);
    if (!blocks_->can_allocate(match, num_cached + n)) break;  // FIFO
    blocks_->share(match, seq->num_tokens(), seq->mutable_block_table());
    seq->advance_computed(num_cached);
    blocks_->allocate(seq->mutable_block_table(), num_cached + n);
    waiting_.pop_front();
    seq->set_status(SequenceStatus::kRunning);
    running_.push_back(seq);
    push_scheduled(seq, n, token_budget, out);
  }
}

Sequence* Scheduler::preempt_youngest(SchedulerOutput* out) {
  // Final sequences keep their blocks: they run no more steps and end soon.
  auto it = running_.end() - 1;
  while (it != running_.begin() && (*it)->is_final()) --it;
  Sequence* victim = *it;
  running_.erase(it);
  blocks_->free(victim->mutable_block_table());
  victim->reset_for_recompute();
  waiting_.push_front(victim);
  out->preempted.push_back(victim);
  return victim;
}

void Scheduler::push_scheduled(Sequence* seq, int num_new_tokens, int* token_budget,
                               SchedulerOutput* out) {
  const bool samples = num_new_tokens == seq->num_uncomputed_tokens();
  out->scheduled.push_back({seq, num_new_tokens, samples});
  out->num_tokens += num_new_tokens;
  *token_budget -= num_new_tokens;
}

void Scheduler::complete(const SchedulerOutput& output) {
  for (const ScheduledSequence& s : output.scheduled) {
    Sequence* seq = s.seq;
    seq->advance_computed(s.num_new_tokens);
    blocks_->register_full_blocks(seq->tokens(), seq->num_computed_tokens(), seq->block_table(),
                                  seq->mutable_block_hashes());
  }
}

void Scheduler::finish(Sequence* seq) {
  if (seq->status() == SequenceStatus::kFinished) return;
  auto& queue = seq->status() == SequenceStatus::kRunning ? running_ : waiting_;
  auto it = std::find(queue.begin(), queue.end(), seq);
  if (it != queue.end()) queue.erase(it);
  blocks_->free(seq->mutable_block_table());
  seq->set_status(SequenceStatus::kFinished);
}

}  // namespace flashserve::engine
