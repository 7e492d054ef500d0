#pragma once
// Decode steps through CUDA graphs. A decode step of a small model is ~200 kernel launches
// (SmolLM2: 5-6 per layer over 30 layers) of a few microseconds each; launched one by one
// from the host, the launches, not the kernels, set the step time. A CUDA graph replays all
// of them with one launch.
//
// A graph bakes in every pointer and every launch shape, so decode batches are padded to a
// fixed shape first (pad_decode_batch): the number of sequences rounded up to a bucket
// (decode_bucket), the block-table width rounded up to a power of two. Padding rows are
// harmless: token 0 at position 0, KV slot -1 (nothing is written to the cache), K/V
// length 0 (attention reads nothing and writes zeros), never sampled. The runner pads
// whether or not graphs are on, so graphs on and off run the same kernels on the same
// shapes and give bit-identical results.
//
// What a graph does not contain: the metadata upload before it (cudaMemcpyAsync into the
// workspace's metadata block, whose layout is fixed by the shape) and the sampling after
// it (its penalty lists vary in length from step to step).
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "model/cuda/llama_forward.h"
#include "model/runner.h"

typedef struct CUgraphExec_st* cudaGraphExec_t;

namespace flashserve::model::cuda {

// Every sequence brings one token and every sequence is sampled, in order: the steady state
// of serving, and the only steps that run padded (and through graphs).
bool is_decode_batch(const ForwardBatch& batch);

// The padded batch size for num_seqs sequences: exact up to 8, then four buckets per
// doubling (10, 12, 14, 16, 20, 24, 28, 32, 40, ...), so at most 1/4 of the rows are padding.
int decode_bucket(int num_seqs);

// `batch` (is_decode_batch) padded to num_seqs sequences and block tables
// max_blocks_per_seq wide (entries past a sequence's blocks are -1, never read: attention
// reads only the blocks that hold its seqlens_k keys); previous_samples, when given, padded
// with -1.
// REQUIRES: num_seqs >= batch.num_seqs(), max_blocks_per_seq >= batch.max_blocks_per_seq.
ForwardBatch pad_decode_batch(const ForwardBatch& batch, int num_seqs, int max_blocks_per_seq);

// The launch shape a decode graph bakes in.
struct DecodeShape {
  int num_seqs = 0;            // padded
  int max_blocks_per_seq = 0;  // padded
  int num_splits = 0;          // attention_decode's split-KV count
  bool operator==(const DecodeShape&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const DecodeShape& s) {
    return H::combine(std::move(h), s.num_seqs, s.max_blocks_per_seq, s.num_splits);
  }
};

// The graphs of one runner, captured lazily: a shape's first step runs eagerly (it sets
// the kernels' shared-memory attributes and cuBLASLt's plans outside any capture), its
// second is captured and every later one replayed. A graph is recaptured when a buffer it
// points into was reallocated (the workspace grows on demand).
class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // Enqueues llama_forward_cuda(ctx, b, num_layers) for the padded batch `b` of `shape`:
  // eagerly, or by capturing or replaying its graph. ctx.timer must be in TimerMode::kOff
  // (events would be captured into the graph).
  absl::Status run(const ForwardContext& ctx, const DeviceBatch& b, const DecodeShape& shape,
                   int num_layers);
  // Whether run() would replay a graph captured before: none is captured or recaptured (as
  // long as no buffer of ctx.ws moves in between).
  bool ready(const ForwardContext& ctx, const DecodeShape& shape) const;
  int num_graphs() const { return static_cast<int>(graphs_.size()); }

 private:
  struct Entry {
    int num_uses = 0;
    cudaGraphExec_t exec = nullptr;
    std::vector<const void*> pointers;  // the buffers the graph was captured with
  };
  absl::Status capture(const ForwardContext& ctx, const DeviceBatch& b, int num_layers,
                       Entry* entry);

  absl::flat_hash_map<DecodeShape, Entry> graphs_;
};

}  // namespace flashserve::model::cuda
