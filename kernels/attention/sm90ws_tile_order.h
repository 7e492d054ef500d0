#pragma once
// The tile list of the persistent Hopper prefill kernel (attention_prefill_sm90_ws.cuh,
// kPersistent; bench/attention/NOTES.md v10b): which (sequence, head, row block) each list
// entry is, and which entry a CTA takes at each step of its walk. Plain integer functions,
// so that the unit test (tests/unit/kernels_cpu/sm90ws_tile_order_test.cc) checks on the host
// that the walks of all CTAs cover every entry once and the list every tile once.
//
// The list is cut into sections of whole (sequence, head) pairs, f = seq * num_heads + head,
// as many as keep their K/V within kSm90wsL2Budget (GQA heads of one K/V head share theirs: a
// section of S query heads reads S / group K/V heads). Inside a section the row blocks come
// last (longest under the causal mask) first, each over the section's heads. The tiles in
// flight at once (~one a CTA, consecutive in the list) then read few heads' K/V, which stay
// in the L2 as the one-tile grid's do, and each section runs longest first. Walk step k of
// CTA c takes entry k * G + c on even k and k * G + G - 1 - c on odd k (G CTAs): a CTA that
// took one of a round's longest tiles takes one of the next round's shortest, so no CTA
// collects the long ones (v10's plain striding did).
#include <cstdint>

#if defined(__CUDACC__)
#define FS_TILE_HD __host__ __device__ __forceinline__
#else
#define FS_TILE_HD inline
#endif

namespace flashserve::kernels {

// K/V bytes a section may read: half the H100's / H200's 50 MB L2, the rest left for Q, O and
// whatever else runs.
constexpr int64_t kSm90wsL2Budget = int64_t{24} << 20;

struct Sm90wsTile {
  int seq;
  int head;
  int m_block;
};

// Query heads a section holds (>= 1): K/V bytes a query head reads = max_seqlen_k keys x
// head_dim x 2 (K and V) x elem_bytes / the GQA group.
FS_TILE_HD int sm90ws_section_heads(int max_seqlen_k, int head_dim, int num_heads,
                                    int num_kv_heads, int elem_bytes) {
  const int64_t group = num_heads / num_kv_heads;
  int64_t per_head = int64_t{max_seqlen_k} * head_dim * 2 * elem_bytes / group;
  if (per_head < 1) per_head = 1;
  const int64_t heads = kSm90wsL2Budget / per_head;
  return heads < 1 ? 1 : heads > int64_t{1} << 30 ? 1 << 30 : static_cast<int>(heads);
}

// The list entry of CTA `cta` (of `grid`) at walk step k, or -1 past the list's num_l entries.
FS_TILE_HD int sm90ws_walk_entry(int k, int grid, int cta, int num_l) {
  const int64_t l = int64_t{k} * grid + ((k & 1) ? grid - 1 - cta : cta);
  return l < num_l ? static_cast<int>(l) : -1;
}

// List entry l (0 <= l < m_blocks * num_heads * num_seqs) as a tile.
FS_TILE_HD Sm90wsTile sm90ws_list_tile(int l, int m_blocks, int num_heads, int num_seqs,
                                       int section_heads) {
  const int num_f = num_heads * num_seqs;
  const int64_t per_section = int64_t{section_heads} * m_blocks;
  const int section = static_cast<int>(l / per_section);
  const int base = section * section_heads;
  const int heads_here = section_heads < num_f - base ? section_heads : num_f - base;
  const int rem = static_cast<int>(l - section * per_section);
  const int f = base + rem % heads_here;
  return {f / num_heads, f % num_heads, m_blocks - 1 - rem / heads_here};
}

}  // namespace flashserve::kernels
