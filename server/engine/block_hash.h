#pragma once
// Identity of a full KV block for prefix caching: a 128-bit hash chained over the block's
// token ids and its parent's hash, so equal hashes mean equal whole prefixes (up to a
// 2^-128-scale collision chance), not merely equal blocks. The chain starts from a seed that
// identifies everything else that changes the K/V (the model).
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

namespace flashserve::engine {

struct BlockHash {
  uint64_t hi = 0;
  uint64_t lo = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.hi ^ h.lo); }
};

// The root of every chain for one model: a hash of `model_identity` (any bytes that name the
// model and its K/V-relevant settings).
BlockHash block_hash_seed(std::string_view model_identity);

// The hash of a block holding `tokens` whose prefix hashes to `parent`.
BlockHash chain_block_hash(const BlockHash& parent, std::span<const int32_t> tokens);

}  // namespace flashserve::engine
