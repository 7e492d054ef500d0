#pragma once
// The model as the engine sees it: one forward pass over one flat batch per engine step.
// Implemented by the CPU backend (model/cpu/cpu_runner.*) and the CUDA backend
// (model/cuda/cuda_runner.cc); faked in the engine's unit tests. Exactly one thread (the
// engine's) calls a runner.
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/sampling.h"
#include "model/config.h"
#include "model/sampling.h"

namespace flashserve::model {

// One engine step's batch. Sequences are packed: sequence s owns query tokens
// [cu_seqlens_q[s], cu_seqlens_q[s+1]) — a prefill chunk or a single decode token.
struct ForwardBatch {
  std::vector<int32_t> token_ids;     // [num_tokens]
  std::vector<int32_t> positions;     // [num_tokens] absolute position of each token
  std::vector<int32_t> cu_seqlens_q;  // [num_seqs + 1]
  std::vector<int32_t> seqlens_k;     // [num_seqs] KV length after this step's tokens
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq], unused entries -1
  int max_blocks_per_seq = 0;
  std::vector<int32_t> slot_mapping;  // [num_tokens] KV slot of each new token (paged_kv.h)
  // Sampling: the sequences whose last token's successor is sampled this step (an
  // intermediate prefill chunk samples nothing), ascending, with what to sample
  // (model/sampling.h builds the specs; kernels/sampling.h states the rules).
  std::vector<int32_t> sample_seqs;                 // [num_samples]
  std::vector<kernels::SampleSpec> sample_specs;    // [num_samples]
  std::vector<int32_t> penalty_tokens;              // [num_penalties], ranges in the specs
  std::vector<int32_t> penalty_counts;              // [num_penalties]
  // Overlapped steps only (ModelRunner::overlaps()): empty, or [num_tokens] where -1 says
  // token_ids[t] is the token and i >= 0 says the token is sample i (sample_seqs order) of
  // the step launched just before this one, which the host has not seen yet (token_ids[t]
  // is then 0 and ignored): the device reads it from that step's sampling output.
  std::vector<int32_t> previous_samples;
  int num_seqs() const { return static_cast<int>(seqlens_k.size()); }
  int num_tokens() const { return static_cast<int>(token_ids.size()); }
};

// Attention kernel work done in one forward pass, per phase, for the metrics. Bytes and
// FLOPs follow docs/design.md (kernels::attention_cost): bytes = Q, K, V read once + O
// written once; FLOPs = 4*q*k*h*d over the pairs actually attended (causal halves it).
struct AttentionPhaseStats {
  double seconds = 0;
  double bytes = 0;
  double flops = 0;
  int calls = 0;
};
// Device time of one forward pass by part. Backends measure it in some steps only (the CUDA
// backend every kProfileEvery-th step (model/cuda/cuda_runner.cc), to keep the extra timing events off most steps);
// `measured` says whether this step's fields hold a measurement.
struct StepBreakdown {
  bool measured = false;
  double attention_seconds = 0;
  double gemm_seconds = 0;
  double other_seconds = 0;
};
struct ForwardStats {
  AttentionPhaseStats prefill;
  AttentionPhaseStats decode;
  StepBreakdown breakdown;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelConfig& config() const = 0;
  virtual int num_kv_blocks() const = 0;   // blocks in the KV cache (per layer)
  virtual int kv_block_size() const = 0;   // tokens per block
  // What the engine calls every step: runs the batch (appending its K/V to the cache) and
  // samples the next token of every sequence in batch.sample_seqs: sampled->size() ==
  // sample_seqs.size(), in that order. Only token ids (and logprobs when asked) leave the
  // backend. `stats` may be null.
  virtual absl::Status forward(const ForwardBatch& batch, std::vector<SampledToken>* sampled,
                               ForwardStats* stats) = 0;

  // Overlapped steps (optional: true for the CUDA runner). The engine may then launch step
  // N + 1 before it has step N's sampled tokens, so that its host work between two steps
  // (tokens -> text, scheduling, the batch, the runner's own upload and launch) runs while
  // the device computes (docs/design.md "Overlapped steps"). Protocol: launch(N), then any
  // number of {launch(N + 1), wait() -> N's tokens} pairs, each launch at most one ahead of
  // its wait; waits return the launched steps' tokens in launch order; a step's batch and
  // stats must stay alive and unchanged until its wait() returned. A step's tokens that come
  // from the previous step's samples are named in batch.previous_samples. After an error
  // from either call the runner is failed (the engine stops using it). forward() is
  // launch() + wait() with nothing else in flight.
  virtual bool overlaps() const { return false; }
  virtual absl::Status launch(const ForwardBatch& batch, ForwardStats* stats);
  virtual absl::Status wait(std::vector<SampledToken>* sampled);
};

// The two real backends' forward pass up to the logits, for comparing backends with each
// other layer by layer (tests and tools reach it with a dynamic_cast from a ModelRunner;
// the engine never does, and fakes need not implement it). forward() is this pass followed
// by sampling.
class LogitsRunner {
 public:
  virtual ~LogitsRunner() = default;
  // Runs the batch like forward() (appending its K/V to the cache) but through the first
  // `num_layers` layers only (1..config().num_layers; the final norm and LM head then read
  // that layer's output: a "logit lens") and writes fp32 logits of the last query token of
  // every sequence: logits->size() == num_seqs * vocab_size, row s for sequence s.
  // Sampling fields are ignored.
  virtual absl::Status forward_logits(const ForwardBatch& batch, int num_layers,
                                      std::vector<float>* logits) = 0;
};

}  // namespace flashserve::model
