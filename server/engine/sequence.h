#pragma once
// One request's token sequence as the scheduler sees it: prompt + generated tokens, how many
// of them have K/V in the cache, the block table holding that K/V, and its state.
//
//   waiting --schedule--> running --finish--> finished
//      ^                     |
//      +------preempt--------+   (blocks freed, num_computed_tokens = 0: recomputed later)
//
// At admission a sequence starts with num_computed_tokens = the length of its prefix found in
// the prefix cache (block_manager.h); those blocks are shared, the rest is computed.
//
// Sampling, detokenization and stop strings live with the request in the engine
// (output_processor.h), so that the scheduler is pure bookkeeping over token counts.
//
// Thread-safety: none; owned by the engine thread.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "server/engine/block_manager.h"

namespace flashserve::engine {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

class Sequence {
 public:
  using Clock = std::chrono::steady_clock;

  // REQUIRES: prompt is not empty.
  Sequence(uint64_t id, std::vector<int32_t> prompt, Clock::time_point arrival_time);

  uint64_t id() const { return id_; }
  SequenceStatus status() const { return status_; }
  void set_status(SequenceStatus status) { status_ = status; }

  int num_tokens() const { return static_cast<int>(tokens_.size()); }
  int num_prompt_tokens() const { return num_prompt_tokens_; }
  int num_generated_tokens() const { return num_tokens() - num_prompt_tokens_; }
  std::span<const int32_t> tokens() const { return tokens_; }
  std::span<const int32_t> prompt_tokens() const {
    return std::span<const int32_t>(tokens_).first(num_prompt_tokens_);
  }
  std::span<const int32_t> generated_tokens() const {
    return std::span<const int32_t>(tokens_).subspan(num_prompt_tokens_);
  }
  int32_t last_token() const { return tokens_.back(); }
  void append_token(int32_t token) { tokens_.push_back(token); }

  // Overlapped steps (model/runner.h): the token a launched step samples is appended before
  // the step's results reach the host, as a placeholder (kPendingToken) that names the
  // sample: the next step can feed it (the device reads it from the sampling output), and
  // resolve_pending_token() puts the real id in once it is back. At most one is pending, and
  // it is always the last token; it is never among the computed tokens while pending (the
  // step that computes it completes only after it was resolved), so the prefix-cache hashes
  // never see it.
  static constexpr int32_t kPendingToken = -1;
  // REQUIRES: !has_pending_token(), sample_index >= 0.
  void append_pending_token(int sample_index);
  // REQUIRES: has_pending_token().
  void resolve_pending_token(int32_t token);
  bool has_pending_token() const { return pending_sample_ >= 0; }
  int pending_sample() const { return pending_sample_; }  // -1 when none
  // Generated tokens whose ids are known (the pending one is not).
  int num_known_generated_tokens() const {
    return num_generated_tokens() - (has_pending_token() ? 1 : 0);
  }
  // The pending token is the sequence's last (its request stops there by length): the
  // scheduler neither schedules nor preempts it again; the engine finishes it once the token
  // is back.
  void set_final() { final_ = true; }
  bool is_final() const { return final_; }

  // Tokens whose K/V is in the cache; the rest are computed by the next steps (a prefill,
  // possibly in chunks, then one decode token per step).
  int num_computed_tokens() const { return num_computed_tokens_; }
  int num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens_; }
  // REQUIRES: num_computed_tokens() + n <= num_tokens().
  void advance_computed(int n) { num_computed_tokens_ += n; }
  // Back to waiting with nothing cached (the caller frees the blocks).
  void reset_for_recompute();

  const BlockTable& block_table() const { return block_table_; }
  BlockTable* mutable_block_table() { return &block_table_; }
  // The prefix-cache hash chain of the full blocks of tokens() hashed so far (the block
  // manager extends it; tokens are only appended, so it stays valid).
  std::vector<BlockHash>* mutable_block_hashes() { return &block_hashes_; }

  int num_preemptions() const { return num_preemptions_; }

  // Timings, for the final event and the metrics.
  Clock::time_point arrival_time() const { return arrival_time_; }
  bool was_scheduled() const { return first_scheduled_time_.has_value(); }
  void mark_scheduled(Clock::time_point now);  // the first call counts
  Clock::time_point first_scheduled_time() const { return *first_scheduled_time_; }

 private:
  uint64_t id_;
  SequenceStatus status_ = SequenceStatus::kWaiting;
  std::vector<int32_t> tokens_;  // [num_tokens] prompt then generated
  int num_prompt_tokens_;
  int num_computed_tokens_ = 0;
  BlockTable block_table_;
  std::vector<BlockHash> block_hashes_;
  int num_preemptions_ = 0;
  int pending_sample_ = -1;  // the pending token's sample index in its step, or -1
  bool final_ = false;
  Clock::time_point arrival_time_;
  std::optional<Clock::time_point> first_scheduled_time_;
};

}  // namespace flashserve::engine
