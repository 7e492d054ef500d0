#pragma once
// Hands out the fixed-size blocks of the paged KV cache (kernels/paged_kv.h) to sequences on
// demand and takes them back. Blocks are reference-counted so that prefix caching can later
// share a block between sequences; today every block has one owner.
//
// A sequence's block table lists its physical blocks in order: token t lives in block
// table[t / block_size], row t % block_size.
//
// Thread-safety: none; owned and used by the engine thread only.
#include <cstdint>
#include <deque>
#include <vector>

namespace flashserve::engine {

using BlockTable = std::vector<int32_t>;

class BlockManager {
 public:
  // REQUIRES: num_blocks >= 0, block_size >= 1.
  BlockManager(int num_blocks, int block_size);

  int block_size() const { return block_size_; }
  int num_total_blocks() const { return static_cast<int>(num_refs_.size()); }
  int num_free_blocks() const { return static_cast<int>(free_blocks_.size()); }
  int num_used_blocks() const { return num_total_blocks() - num_free_blocks(); }

  // Blocks needed to hold `num_tokens` tokens.
  int num_blocks_for(int num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Whether `table` can grow to hold `num_tokens` tokens with the blocks free now.
  bool can_allocate(const BlockTable& table, int num_tokens) const;
  // Grows `table` with fresh blocks until it holds `num_tokens` tokens (no-op when it already
  // does). REQUIRES: can_allocate(*table, num_tokens).
  void allocate(BlockTable* table, int num_tokens);
  // Drops one reference to every block of `table` (a block is free again at zero references)
  // and clears it.
  void free(BlockTable* table);

  // References held on `block` (0 = free). REQUIRES: 0 <= block < num_total_blocks().
  int num_refs(int32_t block) const { return num_refs_[block]; }

 private:
  int block_size_;
  std::vector<int> num_refs_;       // [num_blocks]
  std::deque<int32_t> free_blocks_; // FIFO: a freed block is reused last
};

}  // namespace flashserve::engine
