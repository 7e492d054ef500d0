// Attention benchmark: the prefill grid of the FlashAttention papers (b*s = 16k tokens,
// h*d = 2048, s = 512..16k, d in {64, 128}, causal and not) and a decode grid over the paged
// cache, for our fused kernels and the naive unfused baseline, in bf16 and fp16 (" fp16" after
// the config; the naive kernel is timed in bf16 only), plus serving-shaped prefill rows.
//
// Every configuration is validated before it is timed: the fused output against the naive
// kernel's on the same inputs (relative L2 <= 8 bf16 units of roundoff, all finite; the
// naive kernel itself is checked against the fp32 CPU reference in the unit tests).
// Timing: CUDA events around each launch, after a warm-up that keeps the GPU busy >= 25 ms
// (the boost clock), median of >= 5 launches (more for short ones). FLOPs and bytes from
// kernels::attention_cost, the formula the served metrics use:
// 4 * d * h * (query, key) pairs attended (exactly s(s+1)/2 per head for causal prefill);
// bytes = Q, K, V read once + O written once. Also measures device-to-device copy bandwidth
// (bytes read + written), the ceiling for decode.
//
// Sliding-window rows (--window, or all by default; --quick: 8k only): causal prefill at
// s = 8k and 16k of the same grid and decode (b16) at ctx 8k/16k, with W = 512 and 4096
// (" w512" in the config); FLOPs and bytes count only the window's (query, key) pairs and
// keys (attention_cost), so TFLOP/s compare with the global rows. Validated against the naive
// kernel with the same window, which is not timed for these rows; SDPA has no window argument
// (peers_sdpa.py: no peer).
//
// Serving-shaped decode rows (with --decode, not --quick): b64/b256 at ctx 64/192, GQA 32/8
// d64 and d128, bf16, each also timed with round_q8_out (impl "ours q8").
//
// Serving-shaped prefill rows (kind "serving", --serving; issue 20), causal, GQA 9/3 d64,
// 32/8 d64, 32/8 d128, through the paged cache as the serving path calls attention_prefill:
// - "b64 varlen64-1024 t<tokens>": one varlen call (cu_seqlens) over 64 prompts whose lengths
//   are drawn from [64, 1024] by serving_varlen_lengths() (fixed LCG seed; peers_sdpa.py
//   draws the same list, and t<tokens> in the config makes a mismatch visible);
// - "b<1|8> q512 ctx<1k..8k>": chunked prefill, 512 new queries per sequence onto ctx keys
//   already cached (seqlens_k = ctx + 512; query i sits at position ctx + i).
// The pinned prefill kernels are timed (which one kAuto runs on a row:
// kernels/attention/README.md's choice table); the naive kernel only validates.
//
//   attention_bench [--prefill] [--decode] [--window] [--serving] [--dtype bf16|fp16|both]
//                   [--csv FILE] [--quick] [--profile[=S]] [--host] (default: all rows, both dtypes)
//                   [--decode-splits=2,4,8]  (each decode grid row also at these splits)
//                   [--max-keys=N]  (prefill and serving rows of at most N keys only)
//                   [--min-keys=N]  (prefill and serving rows of at least N keys only)
//                   [--heads=N]  (the prefill grid at N heads instead of h x d = 2048)
//                   [--head-dim=64|128]  (the prefill grid's rows of that head dim only)
//   attention_bench --lengths     the varlen batch's lengths, one a line (touches no GPU)
// --profile: one untimed launch of each prefill kernel (s8k full; d128, d64; mma.sync, wgmma,
// wgmma_ps), for ncu;
// --profile=S: the same at the grid's length-S rows (b = 16384 / S), full then causal.
// --host: the host time of one attention_prefill call per prefill kernel at a serving-sized
// chunk (b1, 16 new queries onto 1,024 keys, 32/8 d64 causal); no GPU time is counted. The
// wgmma call's excess over mma's bounds what its two tensor-map encodes a call cost.
// Prints a markdown table; --csv writes one line per (config, impl) for peers_sdpa.py.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_check.h"
#include "kernels/attention/attention.h"

namespace flashserve::kernels {
namespace {

// Uniform(-sqrt3, sqrt3) (unit variance) from a hash of the index, rounded to T (bf16, fp16).
template <typename T>
__global__ void fill_random(T* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b9u ^ seed ^ static_cast<uint32_t>(i >> 32);
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    x[i] = T((h * 0x1p-32f * 2.f - 1.f) * 1.7320508f);
  }
}

// Sum of squared difference and of squared reference, over arrays of T (bf16, fp16).
template <typename T>
__global__ void diff_norms(const T* a, const T* b, size_t n,
                           double* out /* [3]: diff^2, ref^2, non-finite */) {
  double d2 = 0, r2 = 0, bad = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float x = float(a[i]), y = float(b[i]);
    if (!isfinite(x)) bad += 1;
    else {
      d2 += double(x - y) * (x - y);
      r2 += double(y) * y;
    }
  }
  atomicAdd(out, d2);
  atomicAdd(out + 1, r2);
  atomicAdd(out + 2, bad);
}

struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit Buffer(size_t b) : bytes(b) { BENCH_CUDA(cudaMalloc(&ptr, std::max<size_t>(b, 16))); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  template <typename T = void>
  T* as() const { return static_cast<T*>(ptr); }
};

void fill(const Buffer& b, uint32_t seed, DType dtype = DType::kBf16) {
  if (dtype == DType::kFp16) fill_random<<<1024, 256>>>(b.as<__half>(), b.bytes / 2, seed);
  else fill_random<<<1024, 256>>>(b.as<__nv_bfloat16>(), b.bytes / 2, seed);
  BENCH_CUDA(cudaGetLastError());
}

// Median milliseconds of `launch` over enough repetitions (>= 5, ~200 ms in total).
// attention_cost of `batch` sequences of q_len queries over k_len keys each, bf16.
AttentionCost uniform_cost(int batch, int q_len, int k_len, int heads, int kv_heads, int head_dim,
                           bool causal, int sliding_window = 0) {
  std::vector<int32_t> cu(batch + 1), seqlens(batch, k_len);
  for (int b = 0; b <= batch; ++b) cu[b] = b * q_len;
  return attention_cost(cu.data(), seqlens.data(), batch, heads, kv_heads, head_dim, 2, causal,
                        sliding_window);
}

double time_ms(const std::function<void()>& launch) {
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  launch();
  launch();
  BENCH_CUDA(cudaDeviceSynchronize());
  // Clock warm-up: back-to-back launches, doubling, until one batch keeps the GPU busy for
  // >= 25 ms. The SM clock drops while the GPU idles (345 MHz read at a call's start on the
  // H100) and takes milliseconds to climb back; a row timed right after host work (the
  // validation, the inputs' upload) could otherwise run its whole timed loop of a 10 us kernel
  // (100 launches, ~2 ms) below the boost clock: single decode rows 3x slow in one run and
  // not in the next (NOTES.md, session 42). peers_sdpa.py times its peers the same way.
  for (int n = 1;; n *= 2) {
    BENCH_CUDA(cudaEventRecord(start));
    for (int i = 0; i < n; ++i) launch();
    BENCH_CUDA(cudaEventRecord(stop));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0.f;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (ms >= 25.f || n >= 4096) break;
  }
  std::vector<float> times;
  float total = 0.f;
  while (times.size() < 5 || (total < 200.f && times.size() < 100)) {
    BENCH_CUDA(cudaEventRecord(start));
    launch();
    BENCH_CUDA(cudaEventRecord(stop));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0.f;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
    total += ms;
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Row {
  std::string kind, config, impl;
  double ms, tflops, gbps;
};
std::vector<Row> g_rows;
FILE* g_csv = nullptr;  // --csv: each row is written (and flushed) as it is measured


void report(const std::string& kind, const std::string& config, const std::string& impl,
            double ms, double flops, double bytes) {
  g_rows.push_back({kind, config, impl, ms, flops / ms * 1e-9, bytes / ms * 1e-6});
  const Row& r = g_rows.back();
  std::printf("| %-7s | %-34s | %-6s | %9.3f | %7.1f | %7.0f |\n", r.kind.c_str(),
              r.config.c_str(), r.impl.c_str(), r.ms, r.tflops, r.gbps);
  std::fflush(stdout);
  if (g_csv != nullptr) {  // a timed-out run still leaves the rows measured so far
    std::fprintf(g_csv, "%s,%s,%s,%.5f,%.2f,%.1f\n", r.kind.c_str(), r.config.c_str(),
                 r.impl.c_str(), r.ms, r.tflops, r.gbps);
    std::fflush(g_csv);
  }
}

// The paged problem: sequence i has q_lens[i] queries (packed, cu_seqlens) over k_lens[i] keys
// in shuffled 64-row blocks of the cache, as the serving path lays them out.
struct PagedProblem {
  AttentionParams p;
  std::unique_ptr<Buffer> q, k, v, out, ref, cu, seqlens, tables;
};

PagedProblem make_problem(const std::vector<int>& q_lens, const std::vector<int>& k_lens,
                          int num_heads, int num_kv_heads, int head_dim, bool causal,
                          uint32_t seed, DType dtype = DType::kBf16) {
  PagedProblem pr;
  const int batch = static_cast<int>(q_lens.size());
  const int max_q = *std::max_element(q_lens.begin(), q_lens.end());
  const int max_k = *std::max_element(k_lens.begin(), k_lens.end());
  const int blocks_per_seq = (max_k + 63) / 64;
  int num_blocks = 0;
  for (int k : k_lens) num_blocks += (k + 63) / 64;
  std::vector<int32_t> perm(num_blocks), cu(batch + 1, 0), seqlens(k_lens.begin(), k_lens.end());
  for (int i = 0; i < num_blocks; ++i) perm[i] = i;
  uint32_t state = seed | 1;
  for (int i = num_blocks - 1; i > 0; --i) {  // Fisher-Yates with an LCG
    state = state * 1664525u + 1013904223u;
    std::swap(perm[i], perm[state % (i + 1)]);
  }
  // Block table [batch, blocks_per_seq]: each sequence's blocks from the shuffled list; the
  // entries past a shorter sequence's last block stay 0 (a valid block, never read).
  std::vector<int32_t> table(size_t(batch) * blocks_per_seq, 0);
  for (int i = 0, next = 0; i < batch; ++i) {
    cu[i + 1] = cu[i] + q_lens[i];
    for (int j = 0; j < (k_lens[i] + 63) / 64; ++j) table[size_t(i) * blocks_per_seq + j] = perm[next++];
  }
  const size_t tokens = size_t(cu[batch]);
  const size_t cache = size_t(num_blocks) * num_kv_heads * 64 * head_dim * 2;
  pr.q = std::make_unique<Buffer>(tokens * num_heads * head_dim * 2);
  pr.k = std::make_unique<Buffer>(cache);
  pr.v = std::make_unique<Buffer>(cache);
  pr.out = std::make_unique<Buffer>(tokens * num_heads * head_dim * 2);
  pr.ref = std::make_unique<Buffer>(tokens * num_heads * head_dim * 2);
  fill(*pr.q, seed, dtype);
  fill(*pr.k, seed + 1, dtype);
  fill(*pr.v, seed + 2, dtype);
  pr.cu.reset(new Buffer(cu.size() * 4));
  BENCH_CUDA(cudaMemcpy(pr.cu->ptr, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
  pr.seqlens.reset(new Buffer(seqlens.size() * 4));
  BENCH_CUDA(cudaMemcpy(pr.seqlens->ptr, seqlens.data(), seqlens.size() * 4, cudaMemcpyHostToDevice));
  pr.tables.reset(new Buffer(table.size() * 4));
  BENCH_CUDA(cudaMemcpy(pr.tables->ptr, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  AttentionParams& p = pr.p;
  p.dtype = dtype;
  p.q = pr.q->ptr;
  p.k_cache = pr.k->ptr;
  p.v_cache = pr.v->ptr;
  p.out = pr.out->ptr;
  p.cu_seqlens_q = pr.cu->as<int32_t>();
  p.seqlens_k = pr.seqlens->as<int32_t>();
  p.block_tables = pr.tables->as<int32_t>();
  p.num_seqs = batch;
  p.max_seqlen_q = max_q;
  p.max_seqlen_k = max_k;
  p.num_heads = num_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.block_size = 64;
  p.num_cache_blocks = num_blocks;
  p.max_blocks_per_seq = blocks_per_seq;
  p.softmax_scale = 1.f / std::sqrt(float(head_dim));
  p.causal = causal;
  return pr;
}

// `batch` sequences of q_len queries over kv_len keys each.
PagedProblem make_problem(int batch, int q_len, int kv_len, int num_heads, int num_kv_heads,
                          int head_dim, bool causal, uint32_t seed, DType dtype = DType::kBf16) {
  return make_problem(std::vector<int>(batch, q_len), std::vector<int>(batch, kv_len), num_heads,
                      num_kv_heads, head_dim, causal, seed, dtype);
}

// Relative L2 distance of out from ref (bf16), and whether every output is finite.
bool validate(const PagedProblem& pr, const char* what) {
  Buffer d_sums(3 * sizeof(double));
  BENCH_CUDA(cudaMemset(d_sums.ptr, 0, d_sums.bytes));
  if (pr.p.dtype == DType::kFp16) {
    diff_norms<<<264, 256>>>(pr.out->as<__half>(), pr.ref->as<__half>(), pr.out->bytes / 2,
                             d_sums.as<double>());
  } else {
    diff_norms<<<264, 256>>>(pr.out->as<__nv_bfloat16>(), pr.ref->as<__nv_bfloat16>(),
                             pr.out->bytes / 2, d_sums.as<double>());
  }
  BENCH_CUDA(cudaGetLastError());
  double sums[3];
  BENCH_CUDA(cudaMemcpy(sums, d_sums.ptr, sizeof(sums), cudaMemcpyDeviceToHost));
  const double rel = std::sqrt(sums[0] / std::max(sums[1], 1e-30));
  const bool ok = sums[2] == 0 && rel <= 8 * 0x1p-8;
  if (!ok) std::printf("VALIDATION FAILED %s: rel L2 %.3g, non-finite %.0f\n", what, rel, sums[2]);
  return ok;
}

// " fp16" after the config of fp16 rows; bf16 rows keep the plain config.
std::string dtype_suffix(DType dtype) { return dtype == DType::kFp16 ? " fp16" : ""; }

// Runs the naive kernel once for the reference, then validates and times each pinned prefill
// implementation ("mma", and on Hopper "wgmma", the one-tile grid, and "wgmma_ps", its
// persistent form, which kAuto runs on unsplit calls of <= 1,024 keys); times the naive
// kernel too if time_naive.
bool run_prefill_impls(PagedProblem& pr, const std::string& kind, const std::string& config,
                       const AttentionCost& cost, bool hopper, bool time_naive) {
  bool all_ok = true;
  std::vector<PrefillImpl> impls = {PrefillImpl::kPortable};
  if (hopper) impls.push_back(PrefillImpl::kHopper);
  if (hopper) impls.push_back(PrefillImpl::kHopperPersistent);  // kAuto's at <= 1,024 keys
  Buffer ws(attention_naive_workspace_bytes(pr.p));
  AttentionParams naive = pr.p;
  naive.out = pr.ref->ptr;
  BENCH_OK(attention_naive(naive, ws.ptr, ws.bytes, nullptr));
  // The "wgmma" row is the warp-specialized Hopper kernel at both head_dims (the v5 and
  // ws_nopp rows, BENCH_SM90_VARIANTS*, went with those kernels after v7/v8; their numbers are
  // in bench/attention/results/).
  // Each in the key splits the runner asks for (model/cuda/llama_forward.cc, attention_run):
  // more than 1 only for the Hopper kernel on a grid under one wave (the b1 rows at 9 heads).
  int num_sms = 0;
  BENCH_CUDA(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
  for (PrefillImpl impl : impls) {
    pr.p.prefill_impl = impl;
    const char* name = impl == PrefillImpl::kHopper               ? "wgmma"
                       : impl == PrefillImpl::kHopperPersistent ? "wgmma_ps"
                                                                : "mma";
    const int splits = attention_prefill_num_splits(pr.p, num_sms);
    Buffer split_ws(std::max<size_t>(attention_prefill_workspace_bytes(pr.p, splits), 1));
    auto run = [&] {
      BENCH_OK(attention_prefill(pr.p, splits, split_ws.ptr, split_ws.bytes, nullptr));
    };
    if (splits > 1) std::printf("  %s %s: %d key splits\n", config.c_str(), name, splits);
    BENCH_CUDA(cudaMemset(pr.out->ptr, 0xff, pr.out->bytes));
    run();
    if (!validate(pr, (config + " " + name).c_str())) {
      all_ok = false;
      continue;
    }
    report(kind, config, name, time_ms(run), cost.flops, cost.bytes);
  }
  if (time_naive) {
    report(kind, config, "naive",
           time_ms([&] { BENCH_OK(attention_naive(naive, ws.ptr, ws.bytes, nullptr)); }),
           cost.flops, cost.bytes);
  }
  return all_ok;
}

// --max-keys=N / --min-keys=N: prefill grid and serving rows whose max_seqlen_k passes N /
// falls short of N are left out (a before/after call on a few rows gets more rounds in its
// time).
int g_max_keys = std::numeric_limits<int>::max();
int g_min_keys = 0;
bool keys_selected(int max_seqlen_k) {
  return max_seqlen_k >= g_min_keys && max_seqlen_k <= g_max_keys;
}
// --heads=N: the prefill grid at N heads (= K/V heads) for both head dims instead of h x d =
// 2048, e.g. so that the d128 grid's 128 N tiles fill whole waves of the SMs (a probe of the
// last wave's idle SMs; peers_sdpa.py takes the same flag). 0: the grid's heads.
int g_prefill_heads = 0;
int prefill_grid_heads(int head_dim) {
  return g_prefill_heads > 0 ? g_prefill_heads : 2048 / head_dim;
}
// --head-dim=D: the prefill grid at head dim D only (a change to one head dim's kernels, whose
// other kernels are the same machine code, is timed on its own rows in half the time). 0: both.
int g_prefill_head_dim = 0;

// The prefill grid; the naive kernel is timed for bf16 only (fp16 rows: validated against it).
bool bench_prefill(bool quick, bool hopper, DType dtype) {
  bool all_ok = true;
  const std::vector<int> lens = quick ? std::vector<int>{1024, 8192}
                                      : std::vector<int>{512, 1024, 2048, 4096, 8192, 16384};
  for (int head_dim : {64, 128}) {
    if (g_prefill_head_dim != 0 && head_dim != g_prefill_head_dim) continue;
    for (bool causal : {false, true}) {
      for (int s : lens) {
        if (!keys_selected(s)) continue;
        const int batch = 16384 / s, heads = prefill_grid_heads(head_dim);
        PagedProblem pr =
            make_problem(batch, s, s, heads, heads, head_dim, causal, 1234 + s, dtype);
        const std::string config = "b" + std::to_string(batch) + " s" + std::to_string(s) +
                                   " h" + std::to_string(heads) + " d" + std::to_string(head_dim) +
                                   (causal ? " causal" : " full") + dtype_suffix(dtype);
        const AttentionCost cost = uniform_cost(batch, s, s, heads, heads, head_dim, causal);
        all_ok &= run_prefill_impls(pr, "prefill", config, cost, hopper,
                                    /*time_naive=*/dtype == DType::kBf16);
      }
    }
  }
  return all_ok;
}

// A decode row's config: "b<batch> ctx<ctx> h<heads>/<kv_heads> d<head_dim><suffix> sp<splits>"
// (peers_sdpa.py parses it).
std::string decode_config(int batch, int ctx, int heads, int kv_heads, int head_dim,
                          const std::string& suffix, int splits) {
  return "b" + std::to_string(batch) + " ctx" + std::to_string(ctx) + " h" +
         std::to_string(heads) + "/" + std::to_string(kv_heads) + " d" +
         std::to_string(head_dim) + suffix + " sp" + std::to_string(splits);
}

// Runs the naive kernel (into pr.ref) and the decode kernel (into pr.out, poisoned first) on
// pr and validates the one against the other; *naive is the naive call, for timing it.
bool decode_matches_naive(PagedProblem& pr, int splits, const Buffer& ws, const Buffer& naive_ws,
                          const std::string& config, AttentionParams* naive) {
  *naive = pr.p;
  naive->out = pr.ref->ptr;
  BENCH_OK(attention_naive(*naive, naive_ws.ptr, naive_ws.bytes, nullptr));
  BENCH_CUDA(cudaMemset(pr.out->ptr, 0xff, pr.out->bytes));
  BENCH_OK(attention_decode(pr.p, splits, ws.ptr, ws.bytes, nullptr));
  return validate(pr, config.c_str());
}

// --decode-splits=LIST: each decode grid row also timed at these split counts (impl
// "sp<k>"; validated like the automatic one; counts past the row's cap are skipped), to see
// what attention_decode_num_splits leaves on the table.
std::vector<int> g_split_sweep;

bool bench_decode(bool quick, int num_sms, DType dtype) {
  bool all_ok = true;
  struct Shape { int heads, kv_heads, head_dim; };
  const std::vector<Shape> shapes = {{9, 3, 64}, {32, 8, 128}};
  const std::vector<int> batches = quick ? std::vector<int>{64} : std::vector<int>{1, 16, 64};
  const std::vector<int> contexts = quick ? std::vector<int>{4096} : std::vector<int>{1024, 4096, 16384};
  for (const Shape& sh : shapes) {
    for (int batch : batches) {
      for (int ctx : contexts) {
        PagedProblem pr =
            make_problem(batch, 1, ctx, sh.heads, sh.kv_heads, sh.head_dim, true, 99 + ctx, dtype);
        const int splits = attention_decode_num_splits(batch, sh.kv_heads, ctx, num_sms);
        const std::string config = decode_config(batch, ctx, sh.heads, sh.kv_heads, sh.head_dim,
                                                 dtype_suffix(dtype), splits);
        const AttentionCost cost =
            uniform_cost(batch, 1, ctx, sh.heads, sh.kv_heads, sh.head_dim, /*causal=*/true);
        const double flops = cost.flops, bytes = cost.bytes;
        Buffer ws(attention_decode_workspace_bytes(pr.p, splits));
        Buffer naive_ws(attention_naive_workspace_bytes(pr.p));
        AttentionParams naive;
        if (!decode_matches_naive(pr, splits, ws, naive_ws, config, &naive)) {
          all_ok = false;
          continue;
        }
        report("decode", config, "ours",
               time_ms([&] { BENCH_OK(attention_decode(pr.p, splits, ws.ptr, ws.bytes, nullptr)); }),
               flops, bytes);
        const int tiles = (ctx + kAttentionKvTile - 1) / kAttentionKvTile;
        for (const int k : g_split_sweep) {
          if (k == splits || k < 1 || k > kMaxDecodeSplits || k > tiles) continue;
          // pr.ref still holds the naive kernel's output from the automatic count's check.
          Buffer sws(attention_decode_workspace_bytes(pr.p, k));
          BENCH_CUDA(cudaMemset(pr.out->ptr, 0xff, pr.out->bytes));
          BENCH_OK(attention_decode(pr.p, k, sws.ptr, sws.bytes, nullptr));
          if (!validate(pr, (config + " sp" + std::to_string(k)).c_str())) {
            all_ok = false;
            continue;
          }
          report("decode", config, "sp" + std::to_string(k),
                 time_ms([&] { BENCH_OK(attention_decode(pr.p, k, sws.ptr, sws.bytes, nullptr)); }),
                 flops, bytes);
        }
        if (dtype != DType::kBf16) continue;  // the naive baseline is timed in bf16 only
        report("decode", config, "naive",
               time_ms([&] { BENCH_OK(attention_naive(naive, naive_ws.ptr, naive_ws.bytes, nullptr)); }),
               flops, bytes);
      }
    }
  }
  return all_ok;
}

// Decode at the batch sizes and short contexts a busy server runs (Llama-3.2-1B's 32/8 d64,
// Llama-3.1-8B's 32/8 d128; 64 and 256 sequences, 64 and 192 cached keys), bf16, also timed
// with round_q8_out (impl "ours q8": the output rounded to the q8 grid for a native O
// projection, as the served native path runs it; its bits are pinned by the unit tests).
bool bench_decode_serving(int num_sms) {
  bool all_ok = true;
  struct Shape { int heads, kv_heads, head_dim; };
  for (const Shape& sh : {Shape{32, 8, 64}, Shape{32, 8, 128}}) {
    for (int batch : {64, 256}) {
      for (int ctx : {64, 192}) {
        PagedProblem pr = make_problem(batch, 1, ctx, sh.heads, sh.kv_heads, sh.head_dim, true,
                                       77 + ctx, DType::kBf16);
        const int splits = attention_decode_num_splits(batch, sh.kv_heads, ctx, num_sms);
        const std::string config =
            decode_config(batch, ctx, sh.heads, sh.kv_heads, sh.head_dim, "", splits);
        const AttentionCost cost =
            uniform_cost(batch, 1, ctx, sh.heads, sh.kv_heads, sh.head_dim, /*causal=*/true);
        Buffer ws(attention_decode_workspace_bytes(pr.p, splits));
        Buffer naive_ws(attention_naive_workspace_bytes(pr.p));
        AttentionParams naive;
        if (!decode_matches_naive(pr, splits, ws, naive_ws, config, &naive)) {
          all_ok = false;
          continue;
        }
        AttentionParams q8 = pr.p;
        q8.round_q8_out = true;
        report("decode", config, "ours",
               time_ms([&] { BENCH_OK(attention_decode(pr.p, splits, ws.ptr, ws.bytes, nullptr)); }),
               cost.flops, cost.bytes);
        report("decode", config, "ours q8",
               time_ms([&] { BENCH_OK(attention_decode(q8, splits, ws.ptr, ws.bytes, nullptr)); }),
               cost.flops, cost.bytes);
      }
    }
  }
  return all_ok;
}

// Serving-shaped prefill (issue 20; see the top of the file and NOTES.md): the varlen batch's
// lengths, 64 draws from [64, 1024] by an LCG with a fixed seed; peers_sdpa.py draws the same.
constexpr int kVarlenSeqs = 64, kVarlenMin = 64, kVarlenMax = 1024;
constexpr uint32_t kVarlenSeed = 20;
constexpr int kChunkTokens = 512;  // chunked prefill: new tokens per sequence

std::vector<int> serving_varlen_lengths() {
  std::vector<int> lens(kVarlenSeqs);
  uint32_t state = kVarlenSeed;
  for (int& len : lens) {
    state = state * 1664525u + 1013904223u;
    len = kVarlenMin + static_cast<int>((state >> 8) % (kVarlenMax - kVarlenMin + 1));
  }
  return lens;
}

struct HeadShape {
  int heads, kv_heads, head_dim;
};
constexpr HeadShape kServingShapes[] = {{9, 3, 64}, {32, 8, 64}, {32, 8, 128}};

std::string heads_config(const HeadShape& sh) {
  return " h" + std::to_string(sh.heads) + "/" + std::to_string(sh.kv_heads) + " d" +
         std::to_string(sh.head_dim) + " causal";
}

// Rows of kind "serving": the varlen batch (each sequence's prompt whole, queries = keys) and
// chunked prefill (kChunkTokens new queries per sequence after ctx keys already cached, so
// seqlens_k = ctx + 512), causal, through the paged cache with the serving path's 64-row blocks.
bool bench_serving(bool quick, bool hopper, DType dtype) {
  bool all_ok = true;
  const std::vector<int> lens = serving_varlen_lengths();
  std::vector<int32_t> cu(lens.size() + 1, 0);
  for (size_t i = 0; i < lens.size(); ++i) cu[i + 1] = cu[i] + lens[i];
  const std::vector<int32_t> seqlens(lens.begin(), lens.end());
  for (const HeadShape& sh : kServingShapes) {
    if (!keys_selected(kVarlenMax)) break;
    PagedProblem pr =
        make_problem(lens, lens, sh.heads, sh.kv_heads, sh.head_dim, true, 2020, dtype);
    const std::string config = "b" + std::to_string(kVarlenSeqs) + " varlen" +
                               std::to_string(kVarlenMin) + "-" + std::to_string(kVarlenMax) +
                               " t" + std::to_string(cu.back()) + heads_config(sh) +
                               dtype_suffix(dtype);
    const AttentionCost cost = attention_cost(cu.data(), seqlens.data(), kVarlenSeqs, sh.heads,
                                              sh.kv_heads, sh.head_dim, 2, /*causal=*/true);
    all_ok &= run_prefill_impls(pr, "serving", config, cost, hopper, /*time_naive=*/false);
  }
  // b1: one long prompt chunked (fills 36-128 of the 132 SMs' CTAs: the shape a split-KV
  // prefill would help); b8: several prompts chunked in the same step.
  for (int batch : quick ? std::vector<int>{8} : std::vector<int>{1, 8}) {
    for (int ctx : quick ? std::vector<int>{1024, 8192} : std::vector<int>{1024, 2048, 4096, 8192}) {
      for (const HeadShape& sh : kServingShapes) {
        if (!keys_selected(ctx + kChunkTokens)) continue;
        PagedProblem pr = make_problem(batch, kChunkTokens, ctx + kChunkTokens, sh.heads,
                                       sh.kv_heads, sh.head_dim, true, 3030 + ctx, dtype);
        const std::string config = "b" + std::to_string(batch) + " q" +
                                   std::to_string(kChunkTokens) + " ctx" + std::to_string(ctx) +
                                   heads_config(sh) + dtype_suffix(dtype);
        const AttentionCost cost = uniform_cost(batch, kChunkTokens, ctx + kChunkTokens, sh.heads,
                                                sh.kv_heads, sh.head_dim, /*causal=*/true);
        all_ok &= run_prefill_impls(pr, "serving", config, cost, hopper, /*time_naive=*/false);
      }
    }
  }
  return all_ok;
}

// Causal prefill and decode with a sliding window (see the top of the file).
bool bench_window(bool quick, bool hopper, int num_sms) {
  bool all_ok = true;
  std::vector<PrefillImpl> impls = {PrefillImpl::kPortable};
  if (hopper) impls.push_back(PrefillImpl::kHopper);
  auto validated = [&](PagedProblem& pr, const std::string& what,
                       const std::function<void()>& run) {
    Buffer ws(attention_naive_workspace_bytes(pr.p));
    AttentionParams naive = pr.p;
    naive.out = pr.ref->ptr;
    BENCH_OK(attention_naive(naive, ws.ptr, ws.bytes, nullptr));
    BENCH_CUDA(cudaMemset(pr.out->ptr, 0xff, pr.out->bytes));
    run();
    const bool ok = validate(pr, what.c_str());
    all_ok &= ok;
    return ok;
  };
  for (int head_dim : {64, 128}) {
    for (int s : quick ? std::vector<int>{8192} : std::vector<int>{8192, 16384}) {
      for (int window : {512, 4096}) {
        const int batch = 16384 / s, heads = 2048 / head_dim;
        PagedProblem pr = make_problem(batch, s, s, heads, heads, head_dim, true, 77 + s);
        pr.p.sliding_window = window;
        const std::string config = "b" + std::to_string(batch) + " s" + std::to_string(s) +
                                   " h" + std::to_string(heads) + " d" + std::to_string(head_dim) +
                                   " causal w" + std::to_string(window);
        const AttentionCost cost = uniform_cost(batch, s, s, heads, heads, head_dim, true, window);
        for (PrefillImpl impl : impls) {
          pr.p.prefill_impl = impl;
          const char* name = impl == PrefillImpl::kHopper ? "wgmma" : "mma";
          auto launch = [&] { BENCH_OK(attention_prefill(pr.p, nullptr)); };
          if (!validated(pr, config + " " + name, launch)) continue;
          report("prefill", config, name, time_ms(launch), cost.flops, cost.bytes);
        }
      }
    }
  }
  struct Shape { int heads, kv_heads, head_dim; };
  for (const Shape& sh : {Shape{9, 3, 64}, Shape{32, 8, 128}}) {
    for (int ctx : quick ? std::vector<int>{8192} : std::vector<int>{8192, 16384}) {
      for (int window : {512, 4096}) {
        const int batch = 16;
        PagedProblem pr =
            make_problem(batch, 1, ctx, sh.heads, sh.kv_heads, sh.head_dim, true, 99 + ctx);
        pr.p.sliding_window = window;
        const int splits = attention_decode_num_splits(batch, sh.kv_heads, ctx, num_sms, window);
        const std::string config =
            "b" + std::to_string(batch) + " ctx" + std::to_string(ctx) + " h" +
            std::to_string(sh.heads) + "/" + std::to_string(sh.kv_heads) + " d" +
            std::to_string(sh.head_dim) + " w" + std::to_string(window) + " sp" +
            std::to_string(splits);
        const AttentionCost cost =
            uniform_cost(batch, 1, ctx, sh.heads, sh.kv_heads, sh.head_dim, true, window);
        Buffer ws(attention_decode_workspace_bytes(pr.p, splits));
        auto launch = [&] { BENCH_OK(attention_decode(pr.p, splits, ws.ptr, ws.bytes, nullptr)); };
        if (!validated(pr, config, launch)) continue;
        report("decode", config, "ours", time_ms(launch), cost.flops, cost.bytes);
      }
    }
  }
  return all_ok;
}

// --host (header). The calls are queued without a synchronisation (200: well inside the
// launch queue, so the host never waits for the GPU); each kernel is launched once before.
void host_costs(bool hopper) {
  using clock = std::chrono::steady_clock;
  PagedProblem pr = make_problem(1, 16, 1024, 32, 8, 64, true, 7);
  auto us_per_call = [&](PrefillImpl impl) {
    constexpr int kCalls = 200;
    pr.p.prefill_impl = impl;
    BENCH_OK(attention_prefill(pr.p, nullptr));
    BENCH_CUDA(cudaDeviceSynchronize());
    const auto t0 = clock::now();
    for (int i = 0; i < kCalls; ++i) BENCH_OK(attention_prefill(pr.p, nullptr));
    const auto t1 = clock::now();
    BENCH_CUDA(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / kCalls;
  };
  std::printf("host: attention_prefill mma %.2f us a call\n", us_per_call(PrefillImpl::kPortable));
  if (!hopper) return;
  std::printf("host: attention_prefill wgmma %.2f us a call\n", us_per_call(PrefillImpl::kHopper));
}

// One launch of each prefill implementation at the grid's row of length `seq` (batch
// 16384 / seq), d128 then d64, non-causal (and then causal when `causal`), untimed: for ncu.
// Order per row: mma.sync, the one-tile wgmma, its persistent form (with the workspace the
// stream-K walk takes where it runs).
void profile_prefill(bool hopper, int seq, bool causal) {
  for (bool c : {false, true}) {
    if (c && !causal) break;
    for (int head_dim : {128, 64}) {
      PagedProblem pr = make_problem(16384 / seq, seq, seq, 2048 / head_dim, 2048 / head_dim,
                                     head_dim, c, 5);
      pr.p.prefill_impl = PrefillImpl::kPortable;
      BENCH_OK(attention_prefill(pr.p, nullptr));
      if (hopper) {
        pr.p.prefill_impl = PrefillImpl::kHopper;
        BENCH_OK(attention_prefill(pr.p, nullptr));
        pr.p.prefill_impl = PrefillImpl::kHopperPersistent;
        Buffer ws(std::max<size_t>(attention_prefill_workspace_bytes(pr.p, 1), 1));
        BENCH_OK(attention_prefill(pr.p, 1, ws.ptr, ws.bytes, nullptr));
      }
      BENCH_CUDA(cudaDeviceSynchronize());
    }
  }
}

void bench_copy() {
  const size_t bytes = size_t{2} << 30;
  Buffer a(bytes), b(bytes);
  fill(a, 7);
  const double ms = time_ms([&] { BENCH_CUDA(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice)); });
  report("copy", "2 GiB device-to-device", "cuda", ms, 0, 2.0 * bytes);
}

// A "--name=N" flag (prefix with its '='): false when arg is not one; else N into *value, and
// a value that `valid` refuses prints `error` and exits with status 2.
template <typename Valid>
bool int_flag(const char* arg, const char* prefix, int* value, Valid valid, const char* error) {
  const size_t n = std::strlen(prefix);
  if (std::strncmp(arg, prefix, n) != 0) return false;
  *value = std::atoi(arg + n);
  if (!valid(*value)) {
    std::fprintf(stderr, "%s\n", error);
    std::exit(2);
  }
  return true;
}

}  // namespace
}  // namespace flashserve::kernels

int main(int argc, char** argv) {
  using namespace flashserve::kernels;
  bool prefill = false, decode = false, window = false, serving = false, quick = false,
       profile = false, host = false;
  int profile_seq = 8192;
  bool profile_causal = false;
  std::vector<DType> dtypes = {DType::kBf16, DType::kFp16};
  const char* csv = nullptr;
  const auto positive = [](int v) { return v > 0; };
  for (int i = 1; i < argc; ++i) {
    if (int_flag(argv[i], "--max-keys=", &g_max_keys, positive,
                 "--max-keys=N: N must be a positive number of keys") ||
        int_flag(argv[i], "--min-keys=", &g_min_keys, positive,
                 "--min-keys=N: N must be a positive number of keys") ||
        int_flag(argv[i], "--heads=", &g_prefill_heads, positive,
                 "--heads=N: N must be a positive number of heads") ||
        int_flag(argv[i], "--head-dim=", &g_prefill_head_dim,
                 [](int d) { return d == 64 || d == 128; }, "--head-dim=D: D must be 64 or 128")) {
      continue;
    }
    if (!std::strcmp(argv[i], "--prefill")) prefill = true;
    else if (!std::strcmp(argv[i], "--decode")) decode = true;
    else if (!std::strcmp(argv[i], "--window")) window = true;
    else if (!std::strcmp(argv[i], "--serving")) serving = true;
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--profile")) profile = true;
    else if (!std::strcmp(argv[i], "--host")) host = true;
    else if (!std::strncmp(argv[i], "--profile=", 10)) {
      profile = true;
      profile_seq = std::atoi(argv[i] + 10);
      profile_causal = true;
      if (profile_seq < 64 || profile_seq > 16384 || 16384 % profile_seq != 0) {
        std::fprintf(stderr, "--profile=S: S must divide 16384 (64..16384)\n");
        return 2;
      }
    }
    else if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    else if (!std::strncmp(argv[i], "--decode-splits=", 16)) {
      for (const char* c = argv[i] + 16; *c != '\0';) {
        g_split_sweep.push_back(std::atoi(c));
        while (*c != '\0' && *c != ',') ++c;
        if (*c == ',') ++c;
      }
    }
    else if (!std::strcmp(argv[i], "--lengths")) {  // no GPU needed: compare with peers_sdpa.py
      for (int len : serving_varlen_lengths()) std::printf("%d\n", len);
      return 0;
    }
    else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc && !std::strcmp(argv[i + 1], "bf16")) {
      dtypes = {DType::kBf16}, ++i;
    } else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc && !std::strcmp(argv[i + 1], "fp16")) {
      dtypes = {DType::kFp16}, ++i;
    } else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc && !std::strcmp(argv[i + 1], "both")) {
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--prefill] [--decode] [--window] [--serving] [--quick] [--profile[=S]] [--host]\n"
                   "          [--dtype bf16|fp16|both] [--csv FILE] [--decode-splits=LIST] [--max-keys=N]\n"
                   "          [--min-keys=N] [--heads=N] [--head-dim=64|128]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!prefill && !decode && !window && !serving) prefill = decode = window = serving = true;
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n\n", prop.name, prop.multiProcessorCount);
  const bool hopper = prop.major == 9 && prop.minor == 0;
  if (profile) {
    profile_prefill(hopper, profile_seq, profile_causal);
    return 0;
  }
  if (host) {
    host_costs(hopper);
    return 0;
  }
  std::printf("| kind    | config                             | impl   |        ms | TFLOP/s |    GB/s |\n");
  std::printf("|---------|------------------------------------|--------|-----------|---------|---------|\n");
  if (csv != nullptr) {
    g_csv = std::fopen(csv, "w");
    if (g_csv == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", csv);
      return 2;
    }
    std::fprintf(g_csv, "kind,config,impl,ms,tflops,gbps\n");
  }
  bench_copy();
  bool ok = true;
  for (DType dtype : dtypes) {
    if (prefill) ok &= bench_prefill(quick, hopper, dtype);
    if (serving) ok &= bench_serving(quick, hopper, dtype);
    if (decode) ok &= bench_decode(quick, prop.multiProcessorCount, dtype);
  }
  if (decode && !quick) ok &= bench_decode_serving(prop.multiProcessorCount);
  // The window rows are bf16 only (no peer; the kernels' dtype paths are the grid's).
  if (window) ok &= bench_window(quick, hopper, prop.multiProcessorCount);
  if (g_csv != nullptr) std::fclose(g_csv);
  if (!ok) std::printf("\nSOME CONFIGURATIONS FAILED VALIDATION (not timed)\n");
  return ok ? 0 : 1;
}
