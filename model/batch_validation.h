#pragma once
// Checks a ForwardBatch (model/runner.h) before any backend touches memory with it. Shared
// by every ModelRunner so that a malformed batch from the engine fails loudly with a status
// instead of reading or writing out of bounds.
#include "absl/status/status.h"
#include "model/config.h"
#include "model/runner.h"

namespace flashserve::model {

// OK when: the batch has >= 1 sequence; token_ids, positions and slot_mapping have
// num_tokens entries; token ids lie in [0, vocab_size); cu_seqlens_q has num_seqs + 1
// entries, starts at 0, grows by >= 1 per sequence and ends at num_tokens; 1 <= q_len(s) <=
// seqlens_k[s]; positions[t] is the causal position seqlens_k[s] - q_len(s) + i of query i;
// block_tables has num_seqs * max_blocks_per_seq entries and every block a sequence touches
// (ceil(seqlens_k / block_size) of them) lies in [0, num_blocks); slot_mapping[t] is the
// slot of positions[t] under the sequence's block table (kernels/paged_kv.h); sample_seqs is
// ascending in [0, num_seqs) with one spec each whose penalty range lies in the arrays;
// previous_samples is empty or has num_tokens entries, each -1 or a sample index in
// [0, num_previous_samples) (the samples of the step launched before: 0 for a runner that
// does not overlap steps, so that any entry >= 0 is refused).
// Otherwise InvalidArgument naming the field, the index and the value.
absl::Status validate_forward_batch(const ForwardBatch& batch, const ModelConfig& config,
                                    int num_blocks, int block_size,
                                    int num_previous_samples = 0);

}  // namespace flashserve::model
