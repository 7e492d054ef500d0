#include "server/engine/batch_builder.h"

#include <algorithm>

namespace flashserve::engine {

void build_batch(const SchedulerOutput& out, int block_size, const SampleSpecFn& sample_spec,
                 model::ForwardBatch* batch) {
  model::ForwardBatch& b = *batch;
  b.token_ids.clear();
  b.positions.clear();
  b.slot_mapping.clear();
  b.seqlens_k.clear();
  b.sample_seqs.clear();
  b.sample_specs.clear();
  b.penalty_tokens.clear();
  b.penalty_counts.clear();
  b.previous_samples.clear();
  b.cu_seqlens_q.assign(1, 0);
  b.max_blocks_per_seq = 0;
  for (const ScheduledSequence& s : out.scheduled) {
    b.max_blocks_per_seq =
        std::max(b.max_blocks_per_seq, static_cast<int>(s.seq->block_table().size()));
  }
  b.block_tables.assign(out.scheduled.size() * b.max_blocks_per_seq, -1);
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const Sequence& seq = *out.scheduled[i].seq;
    const int first = seq.num_computed_tokens();
    const int last = first + out.scheduled[i].num_new_tokens;  // exclusive
    for (int pos = first; pos < last; ++pos) {
      if (seq.has_pending_token() && pos == seq.num_tokens() - 1) {
        // The previous step's sample, still on the device: the runner feeds it from there.
        b.previous_samples.resize(b.token_ids.size(), -1);
        b.previous_samples.push_back(seq.pending_sample());
        b.token_ids.push_back(0);
      } else {
        if (!b.previous_samples.empty()) b.previous_samples.push_back(-1);
        b.token_ids.push_back(seq.tokens()[pos]);
      }
      b.positions.push_back(pos);
      b.slot_mapping.push_back(seq.block_table()[pos / block_size] * block_size +
                               pos % block_size);
    }
    b.cu_seqlens_q.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.seqlens_k.push_back(last);
    std::copy(seq.block_table().begin(), seq.block_table().end(),
              b.block_tables.begin() + i * b.max_blocks_per_seq);
    if (!out.scheduled[i].samples) continue;  // intermediate prefill chunk: nothing sampled
    b.sample_seqs.push_back(static_cast<int32_t>(i));
    b.sample_specs.push_back(sample_spec(seq, batch));
  }
}

}  // namespace flashserve::engine
