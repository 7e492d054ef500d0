#pragma once
// The Hopper prefill's row blocks (kernels/attention/attention_prefill_sm90_ws.cuh), aligned to
// the sequence's end: block j, counted from the end (0 first in the walks, the one whose rows
// see the most keys under the causal mask), holds rows [q_len - (j + 1) block_m,
// q_len - j block_m) clipped at 0. A sequence's partial block is thus its first, the one that
// sees the fewest keys: at d64 causal s512 (192-row blocks, 128-key tiles) blocks of 128, 192
// and 192 rows walk 1, 3 and 4 key tiles, 8 tile steps a head, where the partial block last
// (192, 192, 128 rows over 2, 3 and 4 tiles) takes 9 and idles a warpgroup through 4 of them
// (bench/attention/NOTES.md v51). Blocks past a sequence's first row are empty (rows <= 0):
// a walk sized by the batch's longest sequence skips them.
//
// Plain C++: tested on the host (tests/unit/kernels_cpu/row_blocks_test.cc), computed per
// tile on the device.

#if defined(__CUDACC__)
#define FS_ROWS_HD __host__ __device__ __forceinline__
#else
#define FS_ROWS_HD inline
#endif

namespace flashserve::kernels {

struct RowBlock {
  int m_base;  // the block's first row (>= 0)
  int rows;    // its rows from m_base (<= block_m; <= 0: the block is empty)
};

FS_ROWS_HD RowBlock row_block_from_end(int q_len, int from_end, int block_m) {
  const int m_end = q_len - from_end * block_m;
  const int rows = m_end < block_m ? m_end : block_m;
  return {m_end - rows, rows};
}

}  // namespace flashserve::kernels

#undef FS_ROWS_HD
