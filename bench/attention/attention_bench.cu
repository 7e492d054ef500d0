// Attention benchmark: the prefill grid of the FlashAttention papers (b*s = 16k tokens,
// h*d = 2048, s = 512..16k, d in {64, 128}, causal and not) and a decode grid over the paged
// cache, for our fused kernels and the naive unfused baseline, in bf16.
//
// Every configuration is validated before it is timed: the fused output against the naive
// kernel's on the same inputs (relative L2 <= 8 bf16 units of roundoff, all finite; the
// naive kernel itself is checked against the fp32 CPU reference in the unit tests).
// Timing: CUDA events around each launch, warm-up, median of >= 5 launches (more for short
// ones). FLOPs and bytes from kernels::attention_cost, the formula the served metrics use:
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
//   attention_bench [--prefill] [--decode] [--window] [--csv FILE] [--quick] [--profile]
// --profile: one untimed launch of each prefill kernel (s8k; d128, d64), for ncu.
// Prints a markdown table; --csv writes one line per (config, impl) for peers_sdpa.py.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_check.h"
#include "kernels/attention/attention.h"

namespace flashserve::kernels {
namespace {

// Uniform(-sqrt3, sqrt3) (unit variance) from a hash of the index, rounded to bf16.
__global__ void fill_random_bf16(__nv_bfloat16* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b9u ^ seed ^ static_cast<uint32_t>(i >> 32);
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    x[i] = __float2bfloat16_rn((h * 0x1p-32f * 2.f - 1.f) * 1.7320508f);
  }
}

// Sum of squared difference and of squared reference, over bf16 arrays.
__global__ void diff_norms(const __nv_bfloat16* a, const __nv_bfloat16* b, size_t n,
                           double* out /* [3]: diff^2, ref^2, non-finite */) {
  double d2 = 0, r2 = 0, bad = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const float x = __bfloat162float(a[i]), y = __bfloat162float(b[i]);
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

void fill(const Buffer& b, uint32_t seed) {
  fill_random_bf16<<<1024, 256>>>(b.as<__nv_bfloat16>(), b.bytes / 2, seed);
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

void report(const std::string& kind, const std::string& config, const std::string& impl,
            double ms, double flops, double bytes) {
  g_rows.push_back({kind, config, impl, ms, flops / ms * 1e-9, bytes / ms * 1e-6});
  const Row& r = g_rows.back();
  std::printf("| %-7s | %-34s | %-6s | %9.3f | %7.1f | %7.0f |\n", r.kind.c_str(),
              r.config.c_str(), r.impl.c_str(), r.ms, r.tflops, r.gbps);
  std::fflush(stdout);
}

// The paged problem: every sequence of kv_len keys in shuffled 64-row blocks.
struct PagedProblem {
  AttentionParams p;
  std::unique_ptr<Buffer> q, k, v, out, ref, cu, seqlens, tables;
};

PagedProblem make_problem(int batch, int q_len, int kv_len, int num_heads, int num_kv_heads,
                          int head_dim, bool causal, uint32_t seed) {
  PagedProblem pr;
  const int blocks_per_seq = (kv_len + 63) / 64;
  const int num_blocks = batch * blocks_per_seq;
  std::vector<int32_t> perm(num_blocks), cu(batch + 1), seqlens(batch, kv_len);
  for (int i = 0; i < num_blocks; ++i) perm[i] = i;
  uint32_t state = seed | 1;
  for (int i = num_blocks - 1; i > 0; --i) {  // Fisher-Yates with an LCG
    state = state * 1664525u + 1013904223u;
    std::swap(perm[i], perm[state % (i + 1)]);
  }
  for (int i = 0; i <= batch; ++i) cu[i] = i * q_len;
  const size_t tokens = size_t(batch) * q_len;
  const size_t cache = size_t(num_blocks) * num_kv_heads * 64 * head_dim * 2;
  pr.q = std::make_unique<Buffer>(tokens * num_heads * head_dim * 2);
  pr.k = std::make_unique<Buffer>(cache);
  pr.v = std::make_unique<Buffer>(cache);
  pr.out = std::make_unique<Buffer>(tokens * num_heads * head_dim * 2);
  pr.ref = std::make_unique<Buffer>(tokens * num_heads * head_dim * 2);
  fill(*pr.q, seed);
  fill(*pr.k, seed + 1);
  fill(*pr.v, seed + 2);
  pr.cu.reset(new Buffer(cu.size() * 4));
  BENCH_CUDA(cudaMemcpy(pr.cu->ptr, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
  pr.seqlens.reset(new Buffer(seqlens.size() * 4));
  BENCH_CUDA(cudaMemcpy(pr.seqlens->ptr, seqlens.data(), seqlens.size() * 4, cudaMemcpyHostToDevice));
  pr.tables.reset(new Buffer(perm.size() * 4));
  BENCH_CUDA(cudaMemcpy(pr.tables->ptr, perm.data(), perm.size() * 4, cudaMemcpyHostToDevice));
  AttentionParams& p = pr.p;
  p.dtype = DType::kBf16;
  p.q = pr.q->ptr;
  p.k_cache = pr.k->ptr;
  p.v_cache = pr.v->ptr;
  p.out = pr.out->ptr;
  p.cu_seqlens_q = pr.cu->as<int32_t>();
  p.seqlens_k = pr.seqlens->as<int32_t>();
  p.block_tables = pr.tables->as<int32_t>();
  p.num_seqs = batch;
  p.max_seqlen_q = q_len;
  p.max_seqlen_k = kv_len;
  p.num_heads = num_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.block_size = 64;
  p.max_blocks_per_seq = blocks_per_seq;
  p.softmax_scale = 1.f / std::sqrt(float(head_dim));
  p.causal = causal;
  return pr;
}

// Relative L2 distance of out from ref (bf16), and whether every output is finite.
bool validate(const PagedProblem& pr, const char* what) {
  Buffer d_sums(3 * sizeof(double));
  BENCH_CUDA(cudaMemset(d_sums.ptr, 0, d_sums.bytes));
  diff_norms<<<264, 256>>>(pr.out->as<__nv_bfloat16>(), pr.ref->as<__nv_bfloat16>(),
                           pr.out->bytes / 2, d_sums.as<double>());
  BENCH_CUDA(cudaGetLastError());
  double sums[3];
  BENCH_CUDA(cudaMemcpy(sums, d_sums.ptr, sizeof(sums), cudaMemcpyDeviceToHost));
  const double rel = std::sqrt(sums[0] / std::max(sums[1], 1e-30));
  const bool ok = sums[2] == 0 && rel <= 8 * 0x1p-8;
  if (!ok) std::printf("VALIDATION FAILED %s: rel L2 %.3g, non-finite %.0f\n", what, rel, sums[2]);
  return ok;
}

bool bench_prefill(bool quick, bool hopper) {
  bool all_ok = true;
  std::vector<PrefillImpl> impls = {PrefillImpl::kPortable};
  if (hopper) impls.push_back(PrefillImpl::kHopper);
  const std::vector<int> lens = quick ? std::vector<int>{1024, 8192}
                                      : std::vector<int>{512, 1024, 2048, 4096, 8192, 16384};
  for (int head_dim : {64, 128}) {
    for (bool causal : {false, true}) {
      for (int s : lens) {
        const int batch = 16384 / s, heads = 2048 / head_dim;
        PagedProblem pr = make_problem(batch, s, s, heads, heads, head_dim, causal, 1234 + s);
        const std::string config = "b" + std::to_string(batch) + " s" + std::to_string(s) +
                                   " h" + std::to_string(heads) + " d" + std::to_string(head_dim) +
                                   (causal ? " causal" : " full");
        const AttentionCost cost = uniform_cost(batch, s, s, heads, heads, head_dim, causal);
        const double flops = cost.flops, bytes = cost.bytes;
        Buffer ws(attention_naive_workspace_bytes(pr.p));
        AttentionParams naive = pr.p;
        naive.out = pr.ref->ptr;
        BENCH_OK(attention_naive(naive, ws.ptr, ws.bytes, nullptr));
        // The "wgmma" row is the warp-specialized Hopper kernel at both head_dims (the v5 and
        // ws_nopp rows, BENCH_SM90_VARIANTS*, went with those kernels after v7/v8; their
        // numbers are in bench/attention/results/).
        for (PrefillImpl impl : impls) {
          pr.p.prefill_impl = impl;
          const char* name = impl == PrefillImpl::kHopper ? "wgmma" : "mma";
          BENCH_CUDA(cudaMemset(pr.out->ptr, 0xff, pr.out->bytes));
          BENCH_OK(attention_prefill(pr.p, nullptr));
          if (!validate(pr, (config + " " + name).c_str())) {
            all_ok = false;
            continue;
          }
          report("prefill", config, name,
                 time_ms([&] { BENCH_OK(attention_prefill(pr.p, nullptr)); }), flops, bytes);
        }
        report("prefill", config, "naive",
               time_ms([&] { BENCH_OK(attention_naive(naive, ws.ptr, ws.bytes, nullptr)); }), flops,
               bytes);
      }
    }
  }
  return all_ok;
}

bool bench_decode(bool quick, int num_sms) {
  bool all_ok = true;
  struct Shape { int heads, kv_heads, head_dim; };
  const std::vector<Shape> shapes = {{9, 3, 64}, {32, 8, 128}};
  const std::vector<int> batches = quick ? std::vector<int>{64} : std::vector<int>{1, 16, 64};
  const std::vector<int> contexts = quick ? std::vector<int>{4096} : std::vector<int>{1024, 4096, 16384};
  for (const Shape& sh : shapes) {
    for (int batch : batches) {
      for (int ctx : contexts) {
        PagedProblem pr = make_problem(batch, 1, ctx, sh.heads, sh.kv_heads, sh.head_dim, true, 99 + ctx);
        const int splits = attention_decode_num_splits(batch, sh.kv_heads, ctx, num_sms);
        const std::string config = "b" + std::to_string(batch) + " ctx" + std::to_string(ctx) +
                                   " h" + std::to_string(sh.heads) + "/" + std::to_string(sh.kv_heads) +
                                   " d" + std::to_string(sh.head_dim) + " sp" + std::to_string(splits);
        const AttentionCost cost =
            uniform_cost(batch, 1, ctx, sh.heads, sh.kv_heads, sh.head_dim, /*causal=*/true);
        const double flops = cost.flops, bytes = cost.bytes;
        Buffer ws(attention_decode_workspace_bytes(pr.p, splits));
        Buffer naive_ws(attention_naive_workspace_bytes(pr.p));
        AttentionParams naive = pr.p;
        naive.out = pr.ref->ptr;
        BENCH_OK(attention_naive(naive, naive_ws.ptr, naive_ws.bytes, nullptr));
        BENCH_CUDA(cudaMemset(pr.out->ptr, 0xff, pr.out->bytes));
        BENCH_OK(attention_decode(pr.p, splits, ws.ptr, ws.bytes, nullptr));
        if (!validate(pr, config.c_str())) {
          all_ok = false;
          continue;
        }
        report("decode", config, "ours",
               time_ms([&] { BENCH_OK(attention_decode(pr.p, splits, ws.ptr, ws.bytes, nullptr)); }),
               flops, bytes);
        report("decode", config, "naive",
               time_ms([&] { BENCH_OK(attention_naive(naive, naive_ws.ptr, naive_ws.bytes, nullptr)); }),
               flops, bytes);
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

// One launch of each prefill implementation at s8k non-causal, d128 then d64, untimed: for ncu.
void profile_prefill(bool hopper) {
  for (int head_dim : {128, 64}) {
    PagedProblem pr = make_problem(2, 8192, 8192, 2048 / head_dim, 2048 / head_dim, head_dim,
                                   false, 5);
    pr.p.prefill_impl = PrefillImpl::kPortable;
    BENCH_OK(attention_prefill(pr.p, nullptr));
    if (hopper) {
      pr.p.prefill_impl = PrefillImpl::kHopper;
      BENCH_OK(attention_prefill(pr.p, nullptr));
    }
    BENCH_CUDA(cudaDeviceSynchronize());
  }
}

void bench_copy() {
  const size_t bytes = size_t{2} << 30;
  Buffer a(bytes), b(bytes);
  fill(a, 7);
  const double ms = time_ms([&] { BENCH_CUDA(cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice)); });
  report("copy", "2 GiB device-to-device", "cuda", ms, 0, 2.0 * bytes);
}

}  // namespace
}  // namespace flashserve::kernels

int main(int argc, char** argv) {
  using namespace flashserve::kernels;
  bool prefill = false, decode = false, window = false, quick = false, profile = false;
  const char* csv = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--prefill")) prefill = true;
    else if (!std::strcmp(argv[i], "--decode")) decode = true;
    else if (!std::strcmp(argv[i], "--window")) window = true;
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--profile")) profile = true;
    else if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) csv = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--prefill] [--decode] [--window] [--quick] [--profile] [--csv FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!prefill && !decode && !window) prefill = decode = window = true;
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs\n\n", prop.name, prop.multiProcessorCount);
  if (profile) {
    profile_prefill(prop.major == 9 && prop.minor == 0);
    return 0;
  }
  std::printf("| kind    | config                             | impl   |        ms | TFLOP/s |    GB/s |\n");
  std::printf("|---------|------------------------------------|--------|-----------|---------|---------|\n");
  bench_copy();
  bool ok = true;
  if (prefill) ok &= bench_prefill(quick, prop.major == 9 && prop.minor == 0);
  if (decode) ok &= bench_decode(quick, prop.multiProcessorCount);
  if (window) {
    ok &= bench_window(quick, prop.major == 9 && prop.minor == 0, prop.multiProcessorCount);
  }
  if (csv != nullptr) {
    FILE* f = std::fopen(csv, "w");
    std::fprintf(f, "kind,config,impl,ms,tflops,gbps\n");
    for (const Row& r : g_rows) {
      std::fprintf(f, "%s,%s,%s,%.5f,%.2f,%.1f\n", r.kind.c_str(), r.config.c_str(), r.impl.c_str(),
                   r.ms, r.tflops, r.gbps);
    }
    std::fclose(f);
  }
  if (!ok) std::printf("\nSOME CONFIGURATIONS FAILED VALIDATION (not timed)\n");
  return ok ? 0 : 1;
}
