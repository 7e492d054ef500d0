#include "server/engine/block_manager.h"

#include <algorithm>
#include <cassert>

namespace flashserve::engine {

BlockManager::BlockManager(int num_blocks, int block_size, std::optional<BlockHash> prefix_seed)
    : block_size_(block_size),
      prefix_seed_(prefix_seed),
      num_refs_(num_blocks, 0),
      block_hash_(num_blocks),
      lru_position_(num_blocks, evictable_.end()) {
  assert(num_blocks >= 0 && block_size >= 1);
  for (int32_t b = 0; b < num_blocks; ++b) free_blocks_.push_back(b);
}

bool BlockManager::can_allocate(const BlockTable& table, int num_tokens) const {
  const int needed = num_blocks_for(num_tokens) - static_cast<int>(table.size());
  return needed <= num_free_blocks();
}

bool BlockManager::can_allocate(const PrefixMatch& match, int num_tokens) const {
  const int needed = num_blocks_for(num_tokens) - static_cast<int>(match.blocks.size());
  return std::max(needed, 0) + match.num_unreferenced <= num_free_blocks();
}

int32_t BlockManager::take_free_block() {
  if (!free_blocks_.empty()) {
    const int32_t block = free_blocks_.front();
    free_blocks_.pop_front();
    return block;
  }
  assert(!evictable_.empty());
  const int32_t block = evictable_.front();
  evictable_.pop_front();
  lru_position_[block] = evictable_.end();
  cached_.erase(*block_hash_[block]);
  block_hash_[block].reset();
  ++stats_.num_evictions;
  return block;
}

void BlockManager::allocate(BlockTable* table, int num_tokens) {
  assert(can_allocate(*table, num_tokens));
  while (static_cast<int>(table->size()) < num_blocks_for(num_tokens)) {
    const int32_t block = take_free_block();
    assert(num_refs_[block] == 0);
    num_refs_[block] = 1;
    table->push_back(block);
  }
}

void BlockManager::free(BlockTable* table) {
  for (auto it = table->rbegin(); it != table->rend(); ++it) {
    const int32_t block = *it;
    assert(num_refs_[block] > 0);
    if (--num_refs_[block] > 0) continue;
    if (block_hash_[block]) {
      lru_position_[block] = evictable_.insert(evictable_.end(), block);
    } else {
      free_blocks_.push_back(block);
    }
  }
  table->clear();
}

void BlockManager::extend_hashes(std::span<const int32_t> tokens, int num_blocks,
                                 std::vector<BlockHash>* hashes) const {
  while (static_cast<int>(hashes->size()) < num_blocks) {
    const size_t i = hashes->size();
    const BlockHash& parent = i == 0 ? *prefix_seed_ : hashes->back();
    hashes->push_back(chain_block_hash(parent, tokens.subspan(i * block_size_, block_size_)));
  }
}

PrefixMatch BlockManager::find_prefix(std::span<const int32_t> tokens,
                                      std::vector<BlockHash>* hashes) const {
  PrefixMatch match;
  if (!prefix_caching() || tokens.empty()) return match;
  // Blocks wholly before the last token: that token is always computed, in a block of the
  // sequence's own.
  const int num_candidates = static_cast<int>(tokens.size() - 1) / block_size_;
  extend_hashes(tokens, num_candidates, hashes);
  for (int i = 0; i < num_candidates; ++i) {
    auto it = cached_.find((*hashes)[i]);
    if (it == cached_.end()) break;
    match.blocks.push_back(it->second);
    if (num_refs_[it->second] == 0) ++match.num_unreferenced;
  }
  return match;
}

void BlockManager::add_ref(int32_t block) {
  if (num_refs_[block]++ == 0) {
    assert(lru_position_[block] != evictable_.end());
    evictable_.erase(lru_position_[block]);
    lru_position_[block] = evictable_.end();
  }
}

void BlockManager::share(const PrefixMatch& match, int num_queried_tokens, BlockTable* table) {
  assert(table->empty());
  for (int32_t block : match.blocks) {
    assert(block_hash_[block].has_value());
    add_ref(block);
    table->push_back(block);
  }
  if (!prefix_caching()) return;
  stats_.num_queried_tokens += num_queried_tokens;
  stats_.num_hit_tokens += match.num_tokens(block_size_);
}

void BlockManager::register_full_blocks(std::span<const int32_t> tokens, int num_computed_tokens,
                                        const BlockTable& table,
                                        std::vector<BlockHash>* hashes) {
  if (!prefix_caching()) return;
  const int num_full = std::min(num_computed_tokens / block_size_, static_cast<int>(table.size()));
  extend_hashes(tokens, num_full, hashes);
  // Blocks up to the newest registered one were considered by an earlier call (or shared at
  // admission): start after it.
  int first = num_full;
  while (first > 0 && !block_hash_[table[first - 1]]) --first;
  for (int i = first; i < num_full; ++i) {
    const int32_t block = table[i];
    const BlockHash& h = (*hashes)[i];
    if (!cached_.emplace(h, block).second) continue;  // computed twice: the first copy wins
    block_hash_[block] = h;
  }
}

}  // namespace flashserve::engine
