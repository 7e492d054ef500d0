// fp32 CPU attention over the paged KV cache: the naive baseline and the tiled online-softmax
// (FlashAttention forward) algorithm. Contracts are in attention_ref.h.
//
// Numerics. Scores are s = softmax_scale * (q . k) with the dot product summed in order of
// the head dimension in fp32 in both implementations. The naive version keeps the whole score
// vector of a query row, subtracts its max, and normalises once; the tiled version streams
// K/V in tiles of kv_tile keys and keeps, per query row, a running max m, a running sum
// l = sum exp(s - m) and an unnormalised accumulator acc = sum exp(s - m) v. When a tile
// raises the max from m_old to m_new, l and acc are multiplied by exp(m_old - m_new) before
// the tile's terms are added, so at the end acc / l is the softmax-weighted sum and
// m + log(l) the row's log-sum-exp.
//
// Masked keys. A key a row cannot see is never turned into a score at all (instead of a
// score of -inf): per row and tile we compute only the visible prefix of the tile. A tile in
// which a row sees nothing leaves that row's state untouched, so m stays -inf until the first
// visible key and m_new is always finite when we rescale: exp(m_old - m_new) is then either
// exp(finite) or exp(-inf - finite) = 0, never the NaN of -inf - (-inf). A row that sees no
// key at all (only possible when seqlens_k is 0) gets out = 0 and lse = -inf.
//
// Sliding window. A row sees the contiguous key range [begin, end) of visible_keys(); with a
// window, begin > 0. Tiles stay aligned to multiples of kv_tile from key 0 (as the CUDA
// kernels' tiles are aligned to cache blocks); a work item starts at the tile holding the
// window start of its first query, so tiles wholly before every row's window are never
// loaded, and per row and tile only the keys inside [begin, end) are scored.
//
// Vectorisation without -ffast-math. A dot product is a reduction the compiler may not
// reorder, so instead of one dot product per key, the tiled kernel transposes the K tile to
// [head_dim, tile] once (shared by every query row of the GQA group) and accumulates
// s[j] += q[c] * kt[c][j] with j innermost: independent lanes, the same summation order as
// the naive kernel, and a loop GCC vectorises at -O2. P.V and the rescale loop run over the
// contiguous head dimension.
#include "kernels/cpu/attention_ref.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "kernels/paged_kv.h"

namespace flashserve::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Query positions per work item of the tiled kernel: with a GQA group of 3-8 heads this is
// 96-256 query rows sharing each transposed K tile, while acc stays within L2
// (256 rows x 128 dims x 4 B = 128 KiB).
constexpr int kQueryPositionsPerChunk = 32;

// Below this many multiply-adds (q rows x visible keys x head_dim, upper bound) threading
// costs more than it saves (thread start ~ tens of microseconds); decode steps stay serial.
constexpr int64_t kMinWorkForThreads = int64_t{1} << 22;

struct SeqView {
  int q_start = 0;   // first token of the sequence in q/out
  int q_len = 0;     // query rows of this sequence
  int kv_len = 0;    // keys visible without a causal mask or window
  const int32_t* blocks = nullptr;  // [max_blocks_per_seq]
};

SeqView seq_view(const AttentionCpuParams& p, int s) {
  SeqView v;
  v.q_start = p.cu_seqlens_q[s];
  v.q_len = p.cu_seqlens_q[s + 1] - p.cu_seqlens_q[s];
  v.kv_len = p.seqlens_k[s];
  v.blocks = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
  return v;
}

// The keys query i of `seq` may see: positions [begin, end).
struct KeyRange {
  int begin = 0;
  int end = 0;
};
KeyRange visible_keys(const AttentionCpuParams& p, const SeqView& seq, int i) {
  const int position = seq.kv_len - seq.q_len + i;
  KeyRange r;
  r.end = p.causal ? std::min(seq.kv_len, position + 1) : seq.kv_len;
  // Window: keys k with position - k < W (attention_ref.h).
  if (p.sliding_window > 0) r.begin = std::max(0, position - p.sliding_window + 1);
  return r;
}

const float* cache_row(const AttentionCpuParams& p, const float* cache, const SeqView& seq,
                       int kv_head, int key) {
  const int64_t block = seq.blocks[key / p.block_size];
  return cache + kv_cache_offset(block, kv_head, key % p.block_size, p.num_kv_heads,
                                 p.block_size, p.head_dim);
}

const float* q_row(const AttentionCpuParams& p, int token, int head) {
  return p.q + (static_cast<int64_t>(token) * p.num_heads + head) * p.head_dim;
}

float* out_row(const AttentionCpuParams& p, int token, int head) {
  return p.out + (static_cast<int64_t>(token) * p.num_heads + head) * p.head_dim;
}

void write_lse(const AttentionCpuParams& p, int token, int head, float value) {
  if (p.lse != nullptr) p.lse[static_cast<int64_t>(token) * p.num_heads + head] = value;
}

// ---- naive ------------------------------------------------------------------------------

void naive_row(const AttentionCpuParams& p, const SeqView& seq, int i, int head,
               std::vector<float>& scores) {
  const int kv_head = head / (p.num_heads / p.num_kv_heads);
  const int token = seq.q_start + i;
  const KeyRange keys = visible_keys(p, seq, i);
  const int num_keys = keys.end - keys.begin;
  const float* q = q_row(p, token, head);
  float* out = out_row(p, token, head);
  std::fill(out, out + p.head_dim, 0.f);
  if (num_keys <= 0) {
    write_lse(p, token, head, kNegInf);
    return;
  }
  scores.resize(num_keys);
  float max_score = kNegInf;
  for (int j = 0; j < num_keys; ++j) {
    const float* k = cache_row(p, p.k_cache, seq, kv_head, keys.begin + j);
    float dot = 0.f;
    for (int c = 0; c < p.head_dim; ++c) dot += q[c] * k[c];
    scores[j] = dot * p.softmax_scale;
    max_score = std::max(max_score, scores[j]);
  }
  float sum = 0.f;
  for (int j = 0; j < num_keys; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  for (int j = 0; j < num_keys; ++j) {
    const float* v = cache_row(p, p.v_cache, seq, kv_head, keys.begin + j);
    const float weight = scores[j];
    for (int c = 0; c < p.head_dim; ++c) out[c] += weight * v[c];
  }
  const float inv_sum = 1.f / sum;
  for (int c = 0; c < p.head_dim; ++c) out[c] *= inv_sum;
  write_lse(p, token, head, max_score + std::log(sum));
}

// ---- tiled ------------------------------------------------------------------------------

struct WorkItem {
  int seq = 0;
  int kv_head = 0;
  int first_query = 0;  // query positions [first_query, first_query + num_queries)
  int num_queries = 0;
};

// Per-thread scratch of the tiled kernel, reused across work items.
struct TileScratch {
  std::vector<float> kt;     // [head_dim, kv_tile] transposed K tile
  std::vector<const float*> v_rows;  // [kv_tile]
  std::vector<float> scores;  // [group, kv_tile]
  std::vector<const float*> q_rows;  // [group] the query rows of one position
  std::vector<float*> acc_rows;      // [group] their accumulators
  std::vector<float> acc;     // [num_rows, head_dim]
  std::vector<float> row_max;  // [num_rows] running max m
  std::vector<float> row_sum;  // [num_rows] running sum l
};

// Loads keys [key0, key0 + n) of one KV head into tile columns [col0, col0 + n): K
// transposed into kt, V as row pointers.
void load_tile(const AttentionCpuParams& p, const SeqView& seq, int kv_head, int key0, int n,
               int kv_tile, int col0, TileScratch& sc) {
  for (int j = 0; j < n; ++j) {
    const float* k = cache_row(p, p.k_cache, seq, kv_head, key0 + j);
    float* kt = sc.kt.data() + col0 + j;
    for (int c = 0; c < p.head_dim; ++c) kt[static_cast<size_t>(c) * kv_tile] = k[c];
    sc.v_rows[col0 + j] = cache_row(p, p.v_cache, seq, kv_head, key0 + j);
  }
}

// The hot loops below are register-blocked over the query rows of a GQA group (the heads
// that share a KV head, at one query position: the same K/V tile and the same visible keys)
// and over 64 keys or 64 output columns, with each row's operations exactly those of one
// row alone, in the same order (bench/cpu/NOTES.md, step 10): the blocking changes speed,
// never bits. V16 is GCC's generic 16-float vector: element-wise IEEE operations, built as
// one AVX-512 register, two AVX2 or four SSE ones by the clones below.
// These helpers are always inlined into the clones (so built for each clone's target); no
// V16 ever crosses a call, hence no ABI question (-Wpsabi's warning is about calls).
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float V16 __attribute__((vector_size(64)));
#define FS_ATTENTION_INLINE inline __attribute__((always_inline))

FS_ATTENTION_INLINE V16 load16(const float* p) {
  V16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
FS_ATTENTION_INLINE void store16(float* p, V16 v) { std::memcpy(p, &v, sizeof(v)); }

// Keys per register block of the scores (four 16-lane chains per row) and columns per block
// of the values; query rows per block (up to 16 accumulators).
constexpr int kBlock = 64;
constexpr int kMaxRows = 4;

// The hot loops, built for AVX-512, AVX2 and the baseline; the version is chosen at load by
// what the CPU and OS run (GCC's target_clones). This file builds with -ffp-contract=off
// (kernels/CMakeLists.txt), so every version computes the same operations in the same
// order: the same bits on every CPU.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define FS_ATTENTION_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FS_ATTENTION_CLONES
#endif

// s_r[j] = sum over c (in order, from 0) of q_r[c] * kt[c][j] for keys j0 .. j0 + 63 of R
// rows; s_r = s + r * kv_tile.
template <int R>
FS_ATTENTION_INLINE void score_block(const float* const* q, const float* kt, int head_dim, int kv_tile,
                        int j0, float* s) {
  V16 acc[R][4] = {};
  for (int c = 0; c < head_dim; ++c) {
    const float* k = kt + static_cast<size_t>(c) * kv_tile + j0;
    const V16 k0 = load16(k), k1 = load16(k + 16), k2 = load16(k + 32), k3 = load16(k + 48);
    for (int r = 0; r < R; ++r) {
      const float qc = q[r][c];
      acc[r][0] += qc * k0;
      acc[r][1] += qc * k1;
      acc[r][2] += qc * k2;
      acc[r][3] += qc * k3;
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < 4; ++b) store16(s + static_cast<size_t>(r) * kv_tile + j0 + 16 * b, acc[r][b]);
  }
}

// Scores of keys [key_begin, key_end) of the tile for `rows` query rows (row r's score of
// key j at s[r * kv_tile + j]; a block may also write scores of keys past key_end, which
// nobody reads).
FS_ATTENTION_CLONES
void tile_scores(const float* const* q, int rows, const float* kt, int head_dim, int kv_tile,
                 int key_begin, int key_end, float* s) {
  int j0 = key_begin;
  for (; j0 < key_end && j0 + kBlock <= kv_tile; j0 += kBlock) {
    int r = 0;
    for (; r + 4 <= rows; r += 4) score_block<4>(q + r, kt, head_dim, kv_tile, j0, s + r * kv_tile);
    switch (rows - r) {
      case 3: score_block<3>(q + r, kt, head_dim, kv_tile, j0, s + r * kv_tile); break;
      case 2: score_block<2>(q + r, kt, head_dim, kv_tile, j0, s + r * kv_tile); break;
      case 1: score_block<1>(q + r, kt, head_dim, kv_tile, j0, s + r * kv_tile); break;
      default: break;
    }
  }
  if (j0 >= key_end) return;
  for (int r = 0; r < rows; ++r) {
    float* sr = s + static_cast<size_t>(r) * kv_tile;
    std::fill(sr + j0, sr + key_end, 0.f);
    for (int c = 0; c < head_dim; ++c) {
      const float qc = q[r][c];
      const float* k = kt + static_cast<size_t>(c) * kv_tile;
      for (int j = j0; j < key_end; ++j) sr[j] += qc * k[j];
    }
  }
}

// acc_r[c] += sum over j (in order) of s_r[j] * v_rows[j][c] for columns c0 .. c0 + 16 * NB
// of R rows.
template <int R, int NB>
FS_ATTENTION_INLINE void value_block(const float* s, int kv_tile, const float* const* v_rows, int num_keys,
                        int c0, float* const* acc) {
  V16 blk[R][NB];
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < NB; ++b) blk[r][b] = load16(acc[r] + c0 + 16 * b);
  }
  for (int j = 0; j < num_keys; ++j) {
    V16 v[NB];
    for (int b = 0; b < NB; ++b) v[b] = load16(v_rows[j] + c0 + 16 * b);
    for (int r = 0; r < R; ++r) {
      const float weight = s[static_cast<size_t>(r) * kv_tile + j];
      for (int b = 0; b < NB; ++b) blk[r][b] += weight * v[b];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int b = 0; b < NB; ++b) store16(acc[r] + c0 + 16 * b, blk[r][b]);
  }
}

template <int R>
FS_ATTENTION_INLINE void value_rows(const float* s, int kv_tile, const float* const* v_rows, int num_keys,
                       int head_dim, float* const* acc) {
  int c0 = 0;
  for (; c0 + 64 <= head_dim; c0 += 64) value_block<R, 4>(s, kv_tile, v_rows, num_keys, c0, acc);
  for (; c0 + 16 <= head_dim; c0 += 16) value_block<R, 1>(s, kv_tile, v_rows, num_keys, c0, acc);
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < num_keys; ++j) {
      const float weight = s[static_cast<size_t>(r) * kv_tile + j];
      for (int c = c0; c < head_dim; ++c) acc[r][c] += weight * v_rows[j][c];
    }
  }
}

// acc_r[c] += sum over j of s_r[j] * v_rows[j][c], in j order, for `rows` rows.
FS_ATTENTION_CLONES
void tile_values(const float* s, int kv_tile, int rows, const float* const* v_rows,
                 int num_keys, int head_dim, float* const* acc) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    value_rows<4>(s + r * kv_tile, kv_tile, v_rows, num_keys, head_dim, acc + r);
  }
  const float* sr = s + r * kv_tile;
  switch (rows - r) {
    case 3: value_rows<3>(sr, kv_tile, v_rows, num_keys, head_dim, acc + r); break;
    case 2: value_rows<2>(sr, kv_tile, v_rows, num_keys, head_dim, acc + r); break;
    case 1: value_rows<1>(sr, kv_tile, v_rows, num_keys, head_dim, acc + r); break;
    default: break;
  }
}

// Folds keys [first, first + num_keys) of the loaded tile into the (m, l, acc) of `rows`
// query rows that see the same keys (q[r], m[r], l[r], acc[r]).
void update_rows(const AttentionCpuParams& p, const float* const* q, int rows, int first,
                 int num_keys, int kv_tile, TileScratch& sc, float* m, float* l,
                 float* const* acc) {
  float* scores = sc.scores.data();
  tile_scores(q, rows, sc.kt.data(), p.head_dim, kv_tile, first, first + num_keys, scores);
  for (int r = 0; r < rows; ++r) {
    float* s = scores + static_cast<size_t>(r) * kv_tile + first;
    float tile_max = kNegInf;
    for (int j = 0; j < num_keys; ++j) {
      s[j] *= p.softmax_scale;
      tile_max = std::max(tile_max, s[j]);
    }
    const float m_new = std::max(m[r], tile_max);  // finite: num_keys >= 1
    // m == -inf means nothing accumulated yet (l = 0, acc = 0): no rescale, and no
    // exp(-inf - (-inf)) can arise since m_new is finite anyway.
    const float alpha = (m[r] == kNegInf) ? 0.f : std::exp(m[r] - m_new);
    float tile_sum = 0.f;
    for (int j = 0; j < num_keys; ++j) {
      s[j] = std::exp(s[j] - m_new);
      tile_sum += s[j];
    }
    if (alpha != 1.f) {
      for (int c = 0; c < p.head_dim; ++c) acc[r][c] *= alpha;
    }
    l[r] = l[r] * alpha + tile_sum;
    m[r] = m_new;
  }
  tile_values(scores + first, kv_tile, rows, sc.v_rows.data() + first, num_keys, p.head_dim,
              acc);
}

// One (sequence, KV head, chunk of query positions): all query heads of the GQA group,
// each K/V tile loaded once for all of them. Row r = query position offset * group + head.
void tiled_work_item(const AttentionCpuParams& p, const WorkItem& w, int kv_tile,
                     TileScratch& sc) {
  const SeqView seq = seq_view(p, w.seq);
  const int group = p.num_heads / p.num_kv_heads;
  const int num_rows = w.num_queries * group;
  const int d = p.head_dim;
  sc.acc.assign(static_cast<size_t>(num_rows) * d, 0.f);
  sc.row_max.assign(num_rows, kNegInf);
  sc.row_sum.assign(num_rows, 0.f);
  const int last_query = w.first_query + w.num_queries - 1;
  // No row of the chunk sees past the last row's end or before the first row's begin.
  const int kv_end = visible_keys(p, seq, last_query).end;
  const int kv_begin = visible_keys(p, seq, w.first_query).begin;
  for (int t0 = kv_begin / kv_tile * kv_tile; t0 < kv_end; t0 += kv_tile) {
    const int first = kv_begin - t0 > 0 ? kv_begin - t0 : 0;  // keys before it: no row's
    const int n = std::min(kv_tile, kv_end - t0);
    load_tile(p, seq, w.kv_head, t0 + first, n - first, kv_tile, first, sc);
    for (int qi = 0; qi < w.num_queries; ++qi) {
      const int i = w.first_query + qi;
      const KeyRange keys = visible_keys(p, seq, i);
      const int row_first = std::max(keys.begin - t0, 0);
      const int num_keys = std::min(n, keys.end - t0) - row_first;
      if (num_keys <= 0) continue;  // row fully masked in this tile: state unchanged
      const int r = qi * group;  // the group's rows r .. r + group - 1
      for (int hh = 0; hh < group; ++hh) {
        sc.q_rows[hh] = q_row(p, seq.q_start + i, w.kv_head * group + hh);
        sc.acc_rows[hh] = sc.acc.data() + static_cast<size_t>(r + hh) * d;
      }
      update_rows(p, sc.q_rows.data(), group, row_first, num_keys, kv_tile, sc,
                  sc.row_max.data() + r, sc.row_sum.data() + r, sc.acc_rows.data());
    }
  }
  for (int qi = 0; qi < w.num_queries; ++qi) {
    for (int hh = 0; hh < group; ++hh) {
      const int r = qi * group + hh;
      const int token = seq.q_start + w.first_query + qi;
      const int head = w.kv_head * group + hh;
      const float l = sc.row_sum[r];
      const float inv_l = l > 0.f ? 1.f / l : 0.f;  // l == 0: the row saw no key
      const float* acc = sc.acc.data() + static_cast<size_t>(r) * d;
      float* out = out_row(p, token, head);
      for (int c = 0; c < d; ++c) out[c] = acc[c] * inv_l;
      write_lse(p, token, head, l > 0.f ? sc.row_max[r] + std::log(l) : kNegInf);
    }
  }
}

std::vector<WorkItem> make_work_items(const AttentionCpuParams& p, int64_t& total_work) {
  std::vector<WorkItem> items;
  total_work = 0;
  for (int s = 0; s < p.num_seqs; ++s) {
    const SeqView seq = seq_view(p, s);
    const int keys = p.sliding_window > 0 ? std::min(seq.kv_len, p.sliding_window) : seq.kv_len;
    total_work += static_cast<int64_t>(seq.q_len) * p.num_heads * keys * p.head_dim;
    for (int g = 0; g < p.num_kv_heads; ++g) {
      for (int i = 0; i < seq.q_len; i += kQueryPositionsPerChunk) {
        items.push_back({s, g, i, std::min(kQueryPositionsPerChunk, seq.q_len - i)});
      }
    }
  }
  return items;
}

// Runs fn(item, scratch) over all items, on several threads when the work is large: the
// pool's tasks when there is one (a task that starts late finds the items taken and
// returns at once; the pool's caller never waits for it), else std::thread workers.
template <typename Fn>
void run_work_items(const std::vector<WorkItem>& items, int64_t total_work,
                    const AttentionPool* pool, Fn fn) {
  const int hw = pool != nullptr
                     ? pool->num_threads
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int num_threads =
      total_work < kMinWorkForThreads ? 1 : std::min<int>(hw, static_cast<int>(items.size()));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    TileScratch scratch;
    for (size_t k = next.fetch_add(1); k < items.size(); k = next.fetch_add(1)) {
      fn(items[k], scratch);
    }
  };
  if (num_threads <= 1) {
    worker();
    return;
  }
  if (pool != nullptr && pool->run != nullptr) {
    pool->run(pool->ctx, num_threads,
              [](void* ctx, int) { (*static_cast<decltype(worker)*>(ctx))(); }, &worker);
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(num_threads - 1);
  for (int t = 1; t < num_threads; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
}

}  // namespace

void attention_naive_cpu(const AttentionCpuParams& p) {
  std::vector<float> scores;
  for (int s = 0; s < p.num_seqs; ++s) {
    const SeqView seq = seq_view(p, s);
    for (int i = 0; i < seq.q_len; ++i) {
      for (int h = 0; h < p.num_heads; ++h) naive_row(p, seq, i, h, scores);
    }
  }
}

void attention_tiled_cpu(const AttentionCpuParams& p, int kv_tile, const AttentionPool* pool) {
  kv_tile = std::max(kv_tile, 1);
  int64_t total_work = 0;
  const std::vector<WorkItem> items = make_work_items(p, total_work);
  run_work_items(items, total_work, pool, [&](const WorkItem& w, TileScratch& sc) {
    sc.kt.resize(static_cast<size_t>(p.head_dim) * kv_tile);
    sc.v_rows.resize(kv_tile);
    const int group = p.num_heads / p.num_kv_heads;
    sc.scores.resize(static_cast<size_t>(group) * kv_tile);
    sc.q_rows.resize(group);
    sc.acc_rows.resize(group);
    tiled_work_item(p, w, kv_tile, sc);
  });
}

void kv_append_cpu(const float* new_k, const float* new_v, const int32_t* slot_mapping,
                   int num_tokens, int num_kv_heads, int head_dim, int block_size,
                   float* k_cache, float* v_cache) {
  const size_t row_bytes = static_cast<size_t>(head_dim) * sizeof(float);
  for (int t = 0; t < num_tokens; ++t) {
    const int32_t slot = slot_mapping[t];
    if (slot < 0) continue;  // padding token: nothing to store
    const int64_t block = slot / block_size;
    const int row = slot % block_size;
    for (int g = 0; g < num_kv_heads; ++g) {
      const int64_t src = (static_cast<int64_t>(t) * num_kv_heads + g) * head_dim;
      const int64_t dst = kv_cache_offset(block, g, row, num_kv_heads, block_size, head_dim);
      std::memcpy(k_cache + dst, new_k + src, row_bytes);
      std::memcpy(v_cache + dst, new_v + src, row_bytes);
    }
  }
}

}  // namespace flashserve::kernels
