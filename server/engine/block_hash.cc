#include "server/engine/block_hash.h"

namespace flashserve::engine {
namespace {

// splitmix64's finalizer: a bijection on 64 bits with full avalanche.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

// Two lanes with different keys; each absorbs every input word through `mix`, so the pair
// behaves as one 128-bit hash.
struct Lanes {
  uint64_t hi;
  uint64_t lo;
  void absorb(uint64_t word) {
    hi = mix(hi ^ (word + 0x9E3779B97F4A7C15ull));
    lo = mix(lo + (word ^ 0xD1B54A32D192ED03ull)) * 0xFF51AFD7ED558CCDull;
  }
};

}  // namespace

BlockHash block_hash_seed(std::string_view model_identity) {
  Lanes l{0x6A09E667F3BCC908ull, 0xBB67AE8584CAA73Bull};
  for (unsigned char c : model_identity) l.absorb(c);
  l.absorb(model_identity.size());
  return {l.hi, l.lo};
}

BlockHash chain_block_hash(const BlockHash& parent, std::span<const int32_t> tokens) {
  Lanes l{parent.hi, parent.lo};
  for (int32_t t : tokens) l.absorb(static_cast<uint32_t>(t));
  l.absorb(tokens.size());
  return {l.hi, l.lo};
}

}  // namespace flashserve::engine
