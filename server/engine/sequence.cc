#include "server/engine/sequence.h"

#include <cassert>
#include <utility>

namespace flashserve::engine {

Sequence::Sequence(uint64_t id, std::vector<int32_t> prompt, Clock::time_point arrival_time)
    : id_(id),
      tokens_(std::move(prompt)),
      num_prompt_tokens_(static_cast<int>(tokens_.size())),
      arrival_time_(arrival_time) {
  assert(!tokens_.empty());
}

void Sequence::append_pending_token(int sample_index) {
  assert(!has_pending_token() && sample_index >= 0);
  tokens_.push_back(kPendingToken);
  pending_sample_ = sample_index;
}

void Sequence::resolve_pending_token(int32_t token) {
  assert(has_pending_token() && tokens_.back() == kPendingToken);
  tokens_.back() = token;
  pending_sample_ = -1;
}

void Sequence::reset_for_recompute() {
  assert(block_table_.empty());
  status_ = SequenceStatus::kWaiting;
  num_computed_tokens_ = 0;
  ++num_preemptions_;
}

void Sequence::mark_scheduled(Clock::time_point now) {
  if (!first_scheduled_time_) first_scheduled_time_ = now;
}

}  // namespace flashserve::engine
