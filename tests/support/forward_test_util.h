#pragma once
// Helpers of the forward-pass tests (model_forward, model_cuda): a tiny paged-KV bookkeeping
// of sequences (what the engine's block manager does, reduced to a fixed block list per
// sequence) and logits comparisons.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "base/bf16.h"
#include "model/runner.h"
#include "model/weights.h"

namespace flashserve::testing {

// One sequence: the physical blocks it owns (in logical order) and how many tokens of it
// are already in the KV cache.
struct TestSequence {
  std::vector<int32_t> blocks;
  int num_cached = 0;
};

// Appends `tokens` of `seq` (positions num_cached..) to the batch; call finish_batch after
// the last sequence. Advances seq->num_cached.
// The backend's forward pass up to the logits (model/runner.h LogitsRunner) of a runner
// that load_model made: one of the two real backends, never a fake.
inline model::LogitsRunner* logits_runner(model::ModelRunner* runner) {
  auto* r = dynamic_cast<model::LogitsRunner*>(runner);
  EXPECT_NE(r, nullptr) << "the runner is not a real backend";
  return r;
}

// The weights a bf16 device holds: every projection matrix and the embeddings rounded to
// bf16 (norms, biases and Q/K norm weights stay fp32, as on the device). A CPU runner over
// them gives the error that bf16 weights alone cause: the CUDA tests' yardstick.
inline void round_matrices_to_bf16(model::LlamaWeights* w) {
  auto round_all = [](std::vector<float>& v) {
    for (float& x : v) x = round_to_bf16(x);
  };
  round_all(w->token_embd);
  round_all(w->output);
  for (model::LayerWeights& l : w->layers) {
    for (auto* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) round_all(*v);
  }
}

inline void add_to_batch(TestSequence* seq, std::span<const int32_t> tokens, int block_size,
                         model::ForwardBatch* b) {
  if (b->cu_seqlens_q.empty()) b->cu_seqlens_q.push_back(0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int pos = seq->num_cached + static_cast<int>(i);
    b->token_ids.push_back(tokens[i]);
    b->positions.push_back(pos);
    b->slot_mapping.push_back(seq->blocks[pos / block_size] * block_size + pos % block_size);
  }
  seq->num_cached += static_cast<int>(tokens.size());
  b->cu_seqlens_q.push_back(static_cast<int32_t>(b->token_ids.size()));
  b->seqlens_k.push_back(seq->num_cached);
  b->max_blocks_per_seq = std::max<int>(b->max_blocks_per_seq, seq->blocks.size());
}

// Lays out block_tables from the sequences (in the order they were added), padded with -1.
inline void finish_batch(std::span<TestSequence* const> seqs, model::ForwardBatch* b) {
  b->block_tables.assign(seqs.size() * b->max_blocks_per_seq, -1);
  for (size_t s = 0; s < seqs.size(); ++s) {
    std::copy(seqs[s]->blocks.begin(), seqs[s]->blocks.end(),
              b->block_tables.begin() + s * b->max_blocks_per_seq);
  }
}

inline int argmax(std::span<const float> v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

// ||a - b|| / ||b||.
inline double relative_error(std::span<const float> a, std::span<const float> b) {
  double diff = 0, ref = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    ref += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / ref);
}

inline double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

}  // namespace flashserve::testing
