#pragma once
// Hands out the fixed-size blocks of the paged KV cache (kernels/paged_kv.h) to sequences on
// demand, takes them back, and (with prefix caching on) keeps the K/V of full blocks for
// reuse by later sequences with the same prefix.
//
// A sequence's block table lists its physical blocks in order: token t lives in block
// table[t / block_size], row t % block_size.
//
// Prefix caching. A block whose block_size tokens are all computed is registered under the
// chained hash of the prefix it ends (block_hash.h). A new sequence's longest run of
// registered leading blocks is shared with it (reference count + 1) instead of recomputed.
// Rules:
//  - only full, fully computed blocks are registered, and a shared block is never written:
//    a sequence shares at most the full blocks before its last token, so every token it
//    computes lands in a block of its own;
//  - a registered block nobody references stays cached and counts as free; allocation takes
//    never-registered free blocks first, then evicts the least recently released cached
//    block (a sequence releases its blocks last-first, so a chain's tail goes before its
//    head);
//  - one hash maps to one block: a block computed twice at once is registered once, the
//    other copy is private and freed normally.
//
// Thread-safety: none; owned and used by the engine thread only.
#include <cstdint>
#include <deque>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "server/engine/block_hash.h"

namespace flashserve::engine {

using BlockTable = std::vector<int32_t>;

// Cumulative prefix-cache counters.
struct PrefixCacheStats {
  int64_t num_queried_tokens = 0;  // tokens of sequences looked up at admission
  int64_t num_hit_tokens = 0;      // of those, tokens found cached (not recomputed)
  int64_t num_evictions = 0;       // cached blocks reclaimed for new K/V
};

// A lookup's answer: the cached blocks holding a sequence's longest cached prefix.
struct PrefixMatch {
  std::vector<int32_t> blocks;  // in table order
  int num_unreferenced = 0;     // of those, blocks nobody references now (they count as free)
  int num_tokens(int block_size) const { return static_cast<int>(blocks.size()) * block_size; }
};

class BlockManager {
 public:
  // REQUIRES: num_blocks >= 0, block_size >= 1. `prefix_seed` set = prefix caching on, with
  // chains rooted at that seed (block_hash_seed of the model's identity).
  BlockManager(int num_blocks, int block_size, std::optional<BlockHash> prefix_seed = {});

  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_seed_.has_value(); }
  int num_total_blocks() const { return static_cast<int>(num_refs_.size()); }
  // Blocks an allocation may take: never-registered free blocks + unreferenced cached ones.
  int num_free_blocks() const {
    return static_cast<int>(free_blocks_.size() + evictable_.size());
  }
  // Blocks referenced by at least one sequence.
  int num_used_blocks() const { return num_total_blocks() - num_free_blocks(); }
  // Blocks registered in the prefix cache, referenced or not.
  int num_cached_blocks() const { return static_cast<int>(cached_.size()); }
  const PrefixCacheStats& prefix_stats() const { return stats_; }

  // Blocks needed to hold `num_tokens` tokens.
  int num_blocks_for(int num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Whether `table` can grow to hold `num_tokens` tokens with the blocks free now.
  bool can_allocate(const BlockTable& table, int num_tokens) const;
  // Grows `table` with fresh blocks until it holds `num_tokens` tokens (no-op when it already
  // does), evicting cached blocks when no other block is free.
  // REQUIRES: can_allocate(*table, num_tokens).
  void allocate(BlockTable* table, int num_tokens);
  // Drops one reference to every block of `table`, last block first, and clears it. A block
  // at zero references becomes free; a registered one stays cached until evicted.
  void free(BlockTable* table);

  // The cached blocks of `tokens`' longest cached prefix of full blocks, stopping before the
  // block holding the last token. `hashes` caches the chain of `tokens`' full blocks between
  // calls (extended here). Empty when prefix caching is off.
  PrefixMatch find_prefix(std::span<const int32_t> tokens, std::vector<BlockHash>* hashes) const;
  // Whether an empty table can share `match` and then grow to `num_tokens` tokens.
  bool can_allocate(const PrefixMatch& match, int num_tokens) const;
  // Appends `match`'s blocks to the empty `table`, one reference each, and counts the
  // lookup of `num_queried_tokens` in the stats. REQUIRES: table->empty(), `match` from
  // find_prefix() with no allocation or free since.
  void share(const PrefixMatch& match, int num_queried_tokens, BlockTable* table);
  // Registers the full blocks among the first `num_computed_tokens` of `tokens` (whose K/V
  // `table` holds) that are not cached yet. No-op when prefix caching is off.
  void register_full_blocks(std::span<const int32_t> tokens, int num_computed_tokens,
                            const BlockTable& table, std::vector<BlockHash>* hashes);

  // References held on `block` (0 = free or cached). REQUIRES: 0 <= block < num_total_blocks().
  int num_refs(int32_t block) const { return num_refs_[block]; }
  // Whether `block` is registered in the prefix cache.
  bool is_cached(int32_t block) const { return block_hash_[block].has_value(); }

 private:
  void extend_hashes(std::span<const int32_t> tokens, int num_blocks,
                     std::vector<BlockHash>* hashes) const;
  int32_t take_free_block();
  void add_ref(int32_t block);

  int block_size_;
  std::optional<BlockHash> prefix_seed_;
  std::vector<int> num_refs_;                       // [num_blocks]
  std::deque<int32_t> free_blocks_;                 // unregistered, FIFO: freed = reused last
  std::vector<std::optional<BlockHash>> block_hash_;  // [num_blocks] set while registered
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> cached_;
  std::list<int32_t> evictable_;                    // registered, unreferenced; front = LRU
  std::vector<std::list<int32_t>::iterator> lru_position_;  // [num_blocks] valid in evictable_
  PrefixCacheStats stats_;
};

}  // namespace flashserve::engine
