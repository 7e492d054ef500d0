#pragma once
// Which keys of a tile one query row sees, as an interval of key offsets: the attention
// kernels' mask (causal, the sequence's end, a sliding window) in the form their consumers
// apply it, two compares and a select an element without branches (bench/attention/NOTES.md
// v28: the same three tests written per element compiled to ~9 instructions and two branches
// each). The kernels' per-element keys are kbase + c with c a compile-time constant of their
// unrolled loops, so the interval is computed once a row and tile.
//
// Plain C++: included by host code (its test) and by the CUDA kernels.
#if defined(__CUDACC__)
#define FS_MASK_HD __host__ __device__ __forceinline__
#else
#define FS_MASK_HD inline
#endif

namespace flashserve::kernels {

struct KeyOffsets {
  int lo, hi;  // offsets c with lo <= c <= hi are visible
};

// The offsets c for which key kbase + c is visible to the query at position pos (its key
// index, q_offset + row): key < kv_len, under the causal mask key <= pos, and
// pos - key < window (window <= 2^30, window_keys(): no overflow for |pos - kbase| < 2^30).
FS_MASK_HD KeyOffsets visible_key_offsets(int pos, int kbase, int kv_len, bool causal,
                                          int window) {
  const int diag = pos - kbase;  // causal: c <= diag
  const int end = kv_len - 1 - kbase;
  return {diag - window + 1, causal && diag < end ? diag : end};
}

// Bitwise & keeps both compares and the select branch-free.
FS_MASK_HD bool offset_visible(KeyOffsets r, int c) { return (c >= r.lo) & (c <= r.hi); }

}  // namespace flashserve::kernels
