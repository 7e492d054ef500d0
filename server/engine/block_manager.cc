#include "server/engine/block_manager.h"

#include <cassert>

namespace flashserve::engine {

BlockManager::BlockManager(int num_blocks, int block_size)
    : block_size_(block_size), num_refs_(num_blocks, 0) {
  assert(num_blocks >= 0 && block_size >= 1);
  for (int32_t b = 0; b < num_blocks; ++b) free_blocks_.push_back(b);
}

bool BlockManager::can_allocate(const BlockTable& table, int num_tokens) const {
  const int needed = num_blocks_for(num_tokens) - static_cast<int>(table.size());
  return needed <= num_free_blocks();
}

void BlockManager::allocate(BlockTable* table, int num_tokens) {
  assert(can_allocate(*table, num_tokens));
  while (static_cast<int>(table->size()) < num_blocks_for(num_tokens)) {
    const int32_t block = free_blocks_.front();
    free_blocks_.pop_front();
    assert(num_refs_[block] == 0);
    num_refs_[block] = 1;
    table->push_back(block);
  }
}

void BlockManager::free(BlockTable* table) {
  for (int32_t block : *table) {
    assert(num_refs_[block] > 0);
    if (--num_refs_[block] == 0) free_blocks_.push_back(block);
  }
  table->clear();
}

}  // namespace flashserve::engine
