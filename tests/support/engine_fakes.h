#pragma once
// Test doubles for the engine: a tokenizer whose ids stand for fixed short strings (some of
// them halves of multi-byte UTF-8 characters) and a model runner whose "model" is a function
// of the whole context, read back through the paged KV layout, so that any mistake in
// positions, slot mapping or block tables changes the output or fails the forward pass.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/sampling.h"
#include "model/runner.h"
#include "model/sampling.h"
#include "model/text/tokenizer.h"

namespace flashserve::engine::fakes {

// ---- tokenizer -----------------------------------------------------------------------------

inline constexpr int32_t kEos = 0;
inline constexpr int32_t kBos = 1;
inline constexpr int32_t kFirstLetter = 2;  // ids 2..27: "a".."z"
inline constexpr int32_t kSpace = 28;
inline constexpr int32_t kEAcuteLead = 29;  // "\xC3"        } "é" when adjacent
inline constexpr int32_t kEAcuteTail = 30;  // "\xA9"        }
inline constexpr int32_t kEuroLead = 31;    // "\xE2"        } "€" when adjacent
inline constexpr int32_t kEuroTail = 32;    // "\x82\xAC"    }
inline constexpr int32_t kSt = 33;          // "ST"
inline constexpr int32_t kOp = 34;          // "OP"
inline constexpr int32_t kEndOfTurn = 35;   // "<end>" control, end of generation
inline constexpr int kFakeVocab = 48;       // 36..47: "w36".."w47"

inline int32_t letter(char c) { return kFirstLetter + (c - 'a'); }

class FakeTokenizer : public model::Tokenizer {
 public:
  FakeTokenizer() {
    pieces_.resize(kFakeVocab);
    pieces_[kEos] = "<eos>";
    pieces_[kBos] = "<bos>";
    for (int i = 0; i < 26; ++i) pieces_[kFirstLetter + i] = std::string(1, 'a' + i);
    pieces_[kSpace] = " ";
    pieces_[kEAcuteLead] = "\xC3";
    pieces_[kEAcuteTail] = "\xA9";
    pieces_[kEuroLead] = "\xE2";
    pieces_[kEuroTail] = "\x82\xAC";
    pieces_[kSt] = "ST";
    pieces_[kOp] = "OP";
    pieces_[kEndOfTurn] = "<end>";
    for (int i = 36; i < kFakeVocab; ++i) pieces_[i] = "w" + std::to_string(i);
  }

  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool /*parse_special*/) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(kBos);
    size_t pos = 0;
    while (pos < text.size()) {  // greedy longest match over non-control pieces
      int32_t best = -1;
      for (int32_t id = 0; id < kFakeVocab; ++id) {
        if (is_control(id) || text.substr(pos).rfind(pieces_[id], 0) != 0) continue;
        if (best < 0 || pieces_[id].size() > pieces_[best].size()) best = id;
      }
      if (best < 0) {
        ++pos;  // unknown byte: dropped
        continue;
      }
      ids.push_back(best);
      pos += pieces_[best].size();
    }
    return ids;
  }
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    std::string s;
    for (int32_t id : ids) {
      if (id < 0 || id >= kFakeVocab || (skip_special && is_control(id))) continue;
      s += pieces_[id];
    }
    return s;
  }
  std::string token_bytes(int32_t id) const override {
    return id >= 0 && id < kFakeVocab ? pieces_[id] : "";
  }
  std::string_view token_text(int32_t id) const override {
    return id >= 0 && id < kFakeVocab ? std::string_view(pieces_[id]) : "";
  }
  int vocab_size() const override { return kFakeVocab; }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }
  bool is_end_of_generation(int32_t id) const override {
    return id == kEos || id == kEndOfTurn;
  }
  bool is_control(int32_t id) const override {
    return id == kEos || id == kBos || id == kEndOfTurn;
  }
  bool adds_bos() const override { return true; }

 private:
  std::vector<std::string> pieces_;
};

// ---- model runner --------------------------------------------------------------------------

// The default "model": a letter chosen by a hash of the whole context (never a control id).
inline int32_t hash_next_token(std::span<const int32_t> context) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : context) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return kFirstLetter + static_cast<int32_t>((h >> 17) % 26);
}

// What the fake saw and how it behaves; shared with the test, which keeps it after the
// engine (owner of the runner) is gone.
struct FakeRunnerState {
  std::mutex mu;  // std::mutex: visible to ThreadSanitizer (absl::Mutex from Debian is not)
  // Guarded by mu:
  std::vector<model::ForwardBatch> batches;
  int num_calls = 0;
  int num_calls_with_stats = 0;  // forward() calls given a stats pointer
  model::ForwardStats total_stats;

  // Set before the engine starts; read by the engine thread.
  std::function<int32_t(std::span<const int32_t> context)> next_token = hash_next_token;
  // 1-based call that returns `failure`; atomic: tests also set it while the engine runs.
  std::atomic<int> fail_on_call{-1};
  absl::Status failure = absl::InternalError("fake runner: injected failure");
  // Called at the start of every forward pass (on the engine thread), e.g. to block.
  std::function<void(const model::ForwardBatch&)> on_forward;
  // The runner overlaps steps (model/runner.h launch / wait): set before the engine is built.
  bool overlaps = false;
  // Guarded by mu: tokens fed through previous_samples, and the most launched-and-not-waited
  // steps seen at once.
  int num_previous_sample_tokens = 0;
  int max_in_flight = 0;

  std::vector<model::ForwardBatch> batches_copy() {
    std::lock_guard<std::mutex> lock(mu);
    return batches;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu);
    return num_calls;
  }
  int calls_with_stats() {
    std::lock_guard<std::mutex> lock(mu);
    return num_calls_with_stats;
  }
};

class FakeRunner : public model::ModelRunner {
 public:
  static constexpr int kNumLayers = 2;

  FakeRunner(std::shared_ptr<FakeRunnerState> state, int num_kv_blocks, int block_size,
             int context_length)
      : state_(std::move(state)),
        num_kv_blocks_(num_kv_blocks),
        block_size_(block_size),
        kv_token_(static_cast<size_t>(num_kv_blocks) * block_size, -1),
        kv_position_(kv_token_.size(), -1) {
    config_.architecture = "fake";
    config_.num_layers = kNumLayers;
    config_.num_heads = 2;
    config_.num_kv_heads = 1;
    config_.head_dim = 4;
    config_.hidden_size = 8;
    config_.vocab_size = kFakeVocab;
    config_.context_length = context_length;
  }

  const model::ModelConfig& config() const override { return config_; }
  int num_kv_blocks() const override { return num_kv_blocks_; }
  int kv_block_size() const override { return block_size_; }

  bool overlaps() const override { return state_->overlaps; }

  // Overlap: runs the step at once (its tokens fed from the previous launch's samples where
  // previous_samples says so) and queues its tokens for wait(); refuses what the protocol
  // forbids (a third step in flight, a wait with none, a sample index out of range).
  absl::Status launch(const model::ForwardBatch& batch, model::ForwardStats* stats) override {
    if (!state_->overlaps) return model::ModelRunner::launch(batch, stats);
    if (in_flight_.size() >= 2) {
      return absl::FailedPreconditionError("fake runner: a third step launched before a wait");
    }
    model::ForwardBatch resolved = batch;
    int fed = 0;
    for (size_t t = 0; t < batch.previous_samples.size(); ++t) {
      const int32_t i = batch.previous_samples[t];
      if (i < 0) continue;
      if (i >= static_cast<int32_t>(last_launched_.size())) {
        return absl::InvalidArgumentError(absl::StrCat("fake runner: previous_samples[", t,
                                                       "] = ", i, " past the last step's ",
                                                       last_launched_.size(), " samples"));
      }
      resolved.token_ids[t] = last_launched_[i].token;
      ++fed;
    }
    // `resolved` keeps previous_samples, so that the recorded batch shows which tokens came
    // from the device.
    std::vector<model::SampledToken> sampled;
    if (absl::Status s = run_and_sample(resolved, &sampled, stats); !s.ok()) return s;
    last_launched_ = sampled;
    in_flight_.push_back(std::move(sampled));
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->num_previous_sample_tokens += fed;
    state_->max_in_flight = std::max(state_->max_in_flight, static_cast<int>(in_flight_.size()));
    return absl::OkStatus();
  }
  absl::Status wait(std::vector<model::SampledToken>* sampled) override {
    if (!state_->overlaps) return model::ModelRunner::wait(sampled);
    if (in_flight_.empty()) return absl::FailedPreconditionError("fake runner: nothing to wait for");
    *sampled = std::move(in_flight_.front());
    in_flight_.erase(in_flight_.begin());
    return absl::OkStatus();
  }

  // Runs the fake model and samples with the CPU reference, as the real CPU runner does.
  absl::Status forward(const model::ForwardBatch& batch,
                       std::vector<model::SampledToken>* sampled,
                       model::ForwardStats* stats) override {
    if (std::any_of(batch.previous_samples.begin(), batch.previous_samples.end(),
                    [](int32_t i) { return i >= 0; })) {
      return absl::InvalidArgumentError("fake runner: previous_samples in forward()");
    }
    return run_and_sample(batch, sampled, stats);
  }

 private:
  // `batch` with every token in token_ids.
  absl::Status run_and_sample(const model::ForwardBatch& batch,
                              std::vector<model::SampledToken>* sampled,
                              model::ForwardStats* stats) {
    if (stats != nullptr) {
      std::lock_guard<std::mutex> lock(state_->mu);
      ++state_->num_calls_with_stats;
    }
    std::vector<float> logits;
    if (absl::Status s = run_batch(batch, &logits, stats); !s.ok()) return s;
    sampled->resize(batch.sample_seqs.size());
    for (size_t i = 0; i < batch.sample_seqs.size(); ++i) {
      float* row = logits.data() + static_cast<size_t>(batch.sample_seqs[i]) * kFakeVocab;
      const kernels::SampleResult r =
          kernels::sample_row_cpu(row, kFakeVocab, batch.sample_specs[i],
                                  batch.penalty_tokens.data(), batch.penalty_counts.data());
      (*sampled)[i] = model::to_sampled_token(r, batch.sample_specs[i], kFakeVocab);
    }
    return absl::OkStatus();
  }

  absl::Status run_batch(const model::ForwardBatch& batch, std::vector<float>* logits,
                         model::ForwardStats* stats) {
    int call;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->batches.push_back(batch);
      call = ++state_->num_calls;
    }
    if (state_->on_forward) state_->on_forward(batch);
    if (call == state_->fail_on_call.load()) return state_->failure;
    if (absl::Status s = check_shapes(batch); !s.ok()) return s;
    logits->assign(static_cast<size_t>(batch.num_seqs()) * kFakeVocab, 0.f);
    model::ForwardStats step_stats;
    for (int s = 0; s < batch.num_seqs(); ++s) {
      std::vector<int32_t> context;
      if (absl::Status st = run_sequence(batch, s, &context); !st.ok()) return st;
      write_logits(state_->next_token(context), context,
                   std::span<float>(*logits).subspan(s * kFakeVocab, kFakeVocab));
      add_stats(batch, s, &step_stats);
    }
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      accumulate(step_stats.prefill, &state_->total_stats.prefill);
      accumulate(step_stats.decode, &state_->total_stats.decode);
    }
    if (stats != nullptr) *stats = step_stats;
    return absl::OkStatus();
  }

  absl::Status check_shapes(const model::ForwardBatch& b) const {
    const size_t n = b.token_ids.size();
    if (b.positions.size() != n || b.slot_mapping.size() != n ||
        b.cu_seqlens_q.size() != b.seqlens_k.size() + 1 || b.cu_seqlens_q.front() != 0 ||
        b.cu_seqlens_q.back() != static_cast<int32_t>(n) ||
        b.block_tables.size() != b.seqlens_k.size() * b.max_blocks_per_seq) {
      return absl::InternalError("fake runner: inconsistent batch shapes");
    }
    return absl::OkStatus();
  }

  // Writes the sequence's new tokens into the fake cache, then reads its whole context back
  // through the block table.
  absl::Status run_sequence(const model::ForwardBatch& b, int s,
                            std::vector<int32_t>* context) {
    const int32_t* table = b.block_tables.data() + s * b.max_blocks_per_seq;
    const int first = b.cu_seqlens_q[s], last = b.cu_seqlens_q[s + 1];
    if (last <= first) return absl::InternalError("fake runner: empty query");
    for (int t = first; t < last; ++t) {
      const int pos = b.positions[t];
      if (pos != b.seqlens_k[s] - (last - t)) {
        return absl::InternalError(absl::StrCat("fake runner: token ", t, " at position ",
                                                pos, " but seqlen_k ", b.seqlens_k[s]));
      }
      const int32_t block = table[pos / block_size_];
      if (block < 0 || block >= num_kv_blocks_ ||
          b.slot_mapping[t] != block * block_size_ + pos % block_size_) {
        return absl::InternalError(absl::StrCat("fake runner: bad slot ", b.slot_mapping[t],
                                                " for position ", pos));
      }
      kv_token_[b.slot_mapping[t]] = b.token_ids[t];
      kv_position_[b.slot_mapping[t]] = pos;
    }
    for (int pos = 0; pos < b.seqlens_k[s]; ++pos) {
      const int32_t block = table[pos / block_size_];
      const int slot = block * block_size_ + pos % block_size_;
      if (block < 0 || kv_position_[slot] != pos) {
        return absl::InternalError(absl::StrCat("fake runner: KV of position ", pos,
                                                " missing (slot ", slot, ")"));
      }
      context->push_back(kv_token_[slot]);
    }
    return absl::OkStatus();
  }

  // A unique maximum at `target`; a context-dependent spread elsewhere (for sampling).
  static void write_logits(int32_t target, std::span<const int32_t> context,
                           std::span<float> row) {
    const uint32_t h = static_cast<uint32_t>(hash_next_token(context));
    for (int v = 0; v < kFakeVocab; ++v) {
      row[v] = -static_cast<float>((h * 31u + static_cast<uint32_t>(v) * 17u) % 13u) / 4.f;
    }
    row[target] = 5.f;
  }

  // Decode = one query token; each layer's launch "moves" 100 bytes per key and takes 1 ms.
  void add_stats(const model::ForwardBatch& b, int s, model::ForwardStats* stats) const {
    const int q = b.cu_seqlens_q[s + 1] - b.cu_seqlens_q[s];
    model::AttentionPhaseStats& p = q == 1 ? stats->decode : stats->prefill;
    p.calls = kNumLayers;
    p.seconds = 1e-3 * kNumLayers;
    p.bytes += 100.0 * b.seqlens_k[s] * kNumLayers;
    p.flops += 4.0 * q * b.seqlens_k[s] * kNumLayers;
  }
  static void accumulate(const model::AttentionPhaseStats& from, model::AttentionPhaseStats* to) {
    to->calls += from.calls;
    to->seconds += from.seconds;
    to->bytes += from.bytes;
    to->flops += from.flops;
  }

  std::shared_ptr<FakeRunnerState> state_;
  model::ModelConfig config_;
  int num_kv_blocks_;
  int block_size_;
  std::vector<int32_t> kv_token_;     // [num_kv_blocks * block_size]
  std::vector<int32_t> kv_position_;  // [num_kv_blocks * block_size]
  // Overlap: the tokens of the steps launched and not waited for, oldest first, and of the
  // last launched step (what previous_samples indexes).
  std::vector<std::vector<model::SampledToken>> in_flight_;
  std::vector<model::SampledToken> last_launched_;
};

}  // namespace flashserve::engine::fakes
