#pragma once
// The prefill steps a CUDA runner runs once at start, after capturing its decode graphs, so
// that no serving step pays a first use. The driver loads each kernel on its first launch
// (lazy module loading) and cuBLASLt loads each of its algorithms' kernels the same way; the
// decode graphs launch only decode-sized steps' kernels, so before this warm-up a server's
// first large prefill step paid for the rest: in an 8B Q4_K_M server (--weights native) the
// first 2,048-token step of 16 prompts took ~190 ms against ~53 ms later, which cost the first
// 64-stream load run 7 % of its throughput (bench/serving/NOTES.md, step 18).
//
// Host side only (a pure function of the runner's sizes), so tests need no GPU.
#include <vector>

#include "model/runner.h"

namespace flashserve::model::cuda {

// The longest sequence of a warm-up step: long enough for the prefill attention kernels of
// long queries (kernels/attention/attention_prefill.cu: on Hopper the warp-specialized kernel
// is chosen at head_dim 64 from 2,048 causal queries).
inline constexpr int kWarmUpMaxSeqLen = 2048;

// One step of each size in 128, 256, ... (powers of two below max_batch_tokens), then
// max_batch_tokens: every GEMM path and cuBLASLt m bucket a prefill step can take past the
// decode graphs' sizes. A step of m tokens is ceil(m / L) sequences of up to L =
// min(kWarmUpMaxSeqLen, context_length) tokens at positions 0.., in the cache's blocks 0, 1,
// ... in order (free at start: a request's blocks are written before they are read), the
// last sequence's next token sampled greedily. Token ids cycle through the vocabulary. A step
// that needs more than num_kv_blocks blocks is left out, with every larger one.
std::vector<ForwardBatch> warm_up_batches(int max_batch_tokens, int context_length,
                                          int vocab_size, int num_kv_blocks, int block_size);

}  // namespace flashserve::model::cuda
