#include "model/cuda/warm_up.h"

#include <algorithm>

namespace flashserve::model::cuda {
namespace {

// The step of `tokens` tokens (see warm_up_batches), or an empty batch when the cache has too
// few blocks for it.
ForwardBatch warm_up_batch(int tokens, int seq_len, int vocab_size, int num_kv_blocks,
                           int block_size) {
  ForwardBatch b;
  b.cu_seqlens_q.push_back(0);
  b.max_blocks_per_seq = (seq_len + block_size - 1) / block_size;
  int next_block = 0;
  for (int start = 0; start < tokens; start += seq_len) {
    const int len = std::min(seq_len, tokens - start);
    const int blocks = (len + block_size - 1) / block_size;
    if (next_block + blocks > num_kv_blocks) return ForwardBatch{};
    for (int p = 0; p < len; ++p) {
      b.token_ids.push_back(static_cast<int32_t>((start + p) % vocab_size));
      b.positions.push_back(p);
      b.slot_mapping.push_back((next_block + p / block_size) * block_size + p % block_size);
    }
    for (int j = 0; j < b.max_blocks_per_seq; ++j) {
      b.block_tables.push_back(j < blocks ? next_block + j : -1);
    }
    next_block += blocks;
    b.cu_seqlens_q.push_back(b.num_tokens());
    b.seqlens_k.push_back(len);
  }
  b.sample_seqs.push_back(b.num_seqs() - 1);
  b.sample_specs.emplace_back();  // greedy
  return b;
}

}  // namespace

std::vector<ForwardBatch> warm_up_batches(int max_batch_tokens, int context_length,
                                          int vocab_size, int num_kv_blocks, int block_size) {
  std::vector<ForwardBatch> steps;
  if (max_batch_tokens < 1 || context_length < 1 || vocab_size < 1 || block_size < 1) {
    return steps;
  }
  const int seq_len = std::min(kWarmUpMaxSeqLen, context_length);
  std::vector<int> sizes;
  for (int m = 128; m < max_batch_tokens; m *= 2) sizes.push_back(m);
  sizes.push_back(max_batch_tokens);
  for (const int m : sizes) {
    ForwardBatch b = warm_up_batch(m, seq_len, vocab_size, num_kv_blocks, block_size);
    if (b.num_tokens() == 0) break;
    steps.push_back(std::move(b));
  }
  return steps;
}

}  // namespace flashserve::model::cuda
