#pragma once
// fp32 CPU reference of the sampling kernel (kernels/sampling.h states the rules, step by
// step; this function follows them literally, with sorts instead of the kernel's bisections).
// Used by the CPU backend and as the yardstick of the CUDA kernels' tests.
#include <cstdint>

#include "kernels/sampling.h"

namespace flashserve::kernels {

// logits: [vocab], modified in place as the kernel modifies its row (NaN -> -inf, penalties).
// penalty_tokens / penalty_counts: the whole batch's arrays; this row reads
// [spec.penalty_begin, spec.penalty_end). Token ids outside [0, vocab) are ignored.
// REQUIRES: vocab >= 1.
SampleResult sample_row_cpu(float* logits, int vocab, const SampleSpec& spec,
                            const int32_t* penalty_tokens, const int32_t* penalty_counts);

// The reference of gather_sampled_tokens (kernels/sampling.h), over host pointers: the same
// copy, pair by pair in order.
void gather_sampled_tokens_cpu(const SampledTokenGather& g);

}  // namespace flashserve::kernels
