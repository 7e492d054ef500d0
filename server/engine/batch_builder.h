#pragma once
// Builds one engine step's flat batch (model/runner.h ForwardBatch) from the scheduler's
// choice: for each scheduled sequence its new tokens with their positions and KV slots, its
// KV length and block table, and — when the step samples its next token — the sample spec its
// sampler gives (model/sampling.h), in batch order.
#include <functional>

#include "kernels/sampling.h"
#include "model/runner.h"
#include "server/engine/scheduler.h"
#include "server/engine/sequence.h"

namespace flashserve::engine {

// The spec of `seq`'s next sampled token; appends its penalty entries to the batch's
// penalty_tokens / penalty_counts (Sampler::next_spec).
using SampleSpecFn = std::function<kernels::SampleSpec(const Sequence& seq,
                                                       model::ForwardBatch* batch)>;

// A sequence's pending token (Sequence::has_pending_token) goes in as token 0 with its
// sample index in batch->previous_samples (empty when no token is pending).
// Refills *batch (its vectors keep their capacity from step to step) for `out`, whose
// sequences' block tables hold blocks of `block_size` tokens. REQUIRES: !out.empty(), the
// scheduler allocated the blocks of every scheduled token (before complete()).
void build_batch(const SchedulerOutput& out, int block_size, const SampleSpecFn& sample_spec,
                 model::ForwardBatch* batch);

}  // namespace flashserve::engine
