#pragma once
// The paged KV cache layout shared by every attention kernel (CPU reference and CUDA) and by
// the engine's block manager.
//
//   k_cache, v_cache (one pair per layer): [num_blocks, num_kv_heads, block_size, head_dim]
//
// Token t of sequence s lives in physical block block_tables[s * max_blocks_per_seq +
// t / block_size], row t % block_size. Its "slot" is block * block_size + row; the append
// kernel takes one slot per new token (slot_mapping).
//
// Why [block, kv_head, row, dim] and 64 rows: one KV head's block is one contiguous
// block_size x head_dim tile (64 x 128 x 2 B = 16 KiB in bf16), exactly the K/V tile the
// GPU kernels stream through shared memory, so a tile is one linear copy and a block table
// lookup is paid once per tile, not per row. 64 also keeps the tail waste per sequence
// under 64 tokens (< 1 % of a 8k context).
#include <cstdint>

namespace flashserve::kernels {

inline constexpr int kKvBlockSize = 64;

// Element offset of (block, kv_head, row, 0) in a cache of the layout above.
constexpr int64_t kv_cache_offset(int64_t block, int kv_head, int row, int num_kv_heads,
                                  int block_size, int head_dim) {
  return ((block * num_kv_heads + kv_head) * block_size + row) * static_cast<int64_t>(head_dim);
}

}  // namespace flashserve::kernels
