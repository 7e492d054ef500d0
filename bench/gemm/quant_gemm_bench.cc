// GEMM benchmark for steps past the GEMV (m > 8 tokens): at the linear-layer shapes of
// Llama 3 8B, 3.2 1B and SmolLM2-135M and m from 16 to 4,096 tokens, per call:
//   bf16      cuBLASLt on a bf16 weight (model/cuda/gemm.h): the bf16 weight path;
//   deq+blas  dequantize_bf16 into a workspace, then the same cuBLASLt GEMM: the native
//             path's choice past kernels::quant_gemm_max_tokens() (model/cuda/llama_forward.cc);
//   v4        kernels::quant_gemm with QuantGemmKernel::kMmaSync (mma.sync, A fragments
//             decoded in registers: kernels/quant/quant_gemm.cu);
//   v9        kernels::quant_gemm with QuantGemmKernel::kWgmmaWs (Hopper: wgmma with the decoded
//             weights as the register A operand, warp-specialized: a producer warpgroup and two
//             consumer warpgroups on an mbarrier ring, kernels/quant/quant_gemm_sm90.cu; kAuto's
//             choice on Hopper); "-" on other GPUs;
//   auto      kernels::quant_gemm with QuantGemmKernel::kAuto: what the model runs below
//             quant_gemm_max_tokens();
//   t64, t128, t256  v9 with its token tile forced (QuantGemmParams::token_tile): what each
//             tile would cost where the launcher takes another ("-" off Hopper).
//   auto splits  the k splits auto makes (1: k not split);
//   narrow    kernels::quant_gemm with QuantGemmKernel::kNarrow (mma.sync on tiles of 16-32
//             rows by 16-64 tokens, the weights decoded into shared memory before the PDL
//             wait: kernels/quant/quant_gemm_narrow.cu), its own tile, then each tile forced
//             (rows r, tokens t); for m <= 128 where it takes k, else "-".
// The ratios are against the faster of v4 and v9 ("best").
// First a table of the dequantize alone, per shape and format: kernels::dequantize_bf16,
// with GB/s counting the weight bytes read plus the bf16 bytes written, and their share of a
// device-to-device copy's GB/s (the practical ceiling of a read + write stream).
// Before timing, each is validated against deq+blas: relative L2 <= 1e-2, all finite (the
// two round the weights to bf16 slightly differently, kernels/quant/quant_gemm.h: ~2^-9 a
// weight, ~2e-3 on the outputs; a decoding error is far larger). Timing: weights cycled through enough copies to fill 4x
// the L2, 16 calls captured in a CUDA graph, median of 5 replays, time per call. Prints one
// markdown row per (shape, format, m) with the times, the qgemm TFLOP/s and the ratios.
// bench/gemm/NOTES.md holds the predictions and results.
//
//   quant_gemm_bench [--quick] [--formats=Q4_K,Q8_0,...] [--ms=64,256] [--shapes=8B]
//                    [--dequant-only]
// --quick: Q4_K and m in {16, 32, 64, 128, 256, 512, 1024}; --formats / --ms replace those lists;
// --shapes keeps the shapes whose name starts with the text; --dequant-only prints the
// dequantize table alone.
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

#include "bench/gemm/gemm_bench_util.h"
#include "kernels/quant/quant_gemm.h"
#include "kernels/quant/quant_gemv.h"
#include "kernels/quant/quant_layout.h"
#include "model/cuda/gemm.h"

namespace flashserve::kernels {
namespace {

using namespace bench;  // NOLINT: the bench plumbing
using model::cuda::Gemm;
using model::cuda::GemmOut;

struct Shape {
  const char* name;
  int n, k;
};

// Median seconds per call of `call(stream, i)`: 16 calls in a graph, 5 replays.
double time_calls(const std::function<void(cudaStream_t, int)>& call) { return time_graph(16, 5, call); }

std::vector<void*> weight_copies(WeightFormat f, const Shape& s, size_t l2_bytes) {
  const int64_t wb = weight_bytes(f, s.n, s.k);
  const int copies = static_cast<int>(std::clamp<int64_t>(4 * l2_bytes / wb + 1, 1, 32));
  std::vector<void*> out;
  for (int c = 0; c < copies; ++c) {
    void* w;
    BENCH_CUDA(cudaMalloc(&w, wb));
    fill_weight(f, w, s.n, s.k, 1000 + c);
    out.push_back(w);
  }
  return out;
}

float* g_partials = nullptr;  // quant_gemm_partials_floats(SMs) of scratch
int64_t g_partials_floats = 0;

QuantGemmParams qgemm_params(WeightFormat f, const Shape& s, const void* w, const void* x,
                             void* y, int m, QuantGemmKernel kernel, int token_tile = 0,
                             int row_tile = 0) {
  QuantGemmParams p;
  p.kernel = kernel;
  p.token_tile = token_tile;
  p.row_tile = row_tile;
  p.format = f;
  p.w = w;
  p.x = x;
  p.output = GemvOutput::kBf16;
  p.y = y;
  p.ldy = s.n;
  p.m = m;
  p.n = s.n;
  p.k = s.k;
  p.partials = g_partials;
  p.partials_floats = g_partials_floats;
  return p;
}

DequantizeParams dequant_params(WeightFormat f, const Shape& s, const void* w, void* out) {
  DequantizeParams d;
  d.format = f;
  d.w = w;
  d.num_rows = s.n;
  d.k = s.k;
  d.row_begin = 0;
  d.row_end = s.n;
  d.out = out;
  return d;
}

// One row of the dequantize table (see the top of the file) for shape s in format f.
void dequant_row(const Shape& s, WeightFormat f, size_t l2_bytes, double copy_bytes_per_s) {
  const std::vector<void*> q = weight_copies(f, s, l2_bytes);
  const size_t out_bytes = size_t(s.n) * s.k * 2;
  void* out;
  BENCH_CUDA(cudaMalloc(&out, out_bytes));
  const double t = time_calls([&](cudaStream_t st, int i) {
    BENCH_OK(dequantize_bf16(dequant_params(f, s, q[i % q.size()], out), st));
  });
  const double bytes = double(weight_bytes(f, s.n, s.k)) + double(out_bytes);
  std::printf("| %s | %s | %.1f | %.1f | %.0f | %.0f %% |\n", s.name, weight_format_name(f),
              bytes / 1e6, t * 1e6, bytes / t / 1e9, 100.0 * bytes / t / copy_bytes_per_s);
  std::fflush(stdout);
  for (void* w : q) BENCH_CUDA(cudaFree(w));
  BENCH_CUDA(cudaFree(out));
}

// Relative L2 distance of qgemm from deq+blas on copy 0.
double validate(Gemm& gemm, WeightFormat f, const Shape& s, void* w, void* x, void* y,
                void* y_ref, void* deq, int m, int num_sms, QuantGemmKernel v,
                int token_tile = 0, int row_tile = 0) {
  BENCH_CUDA(cudaMemset(y, 0xff, size_t(m) * s.n * 2));  // NaN: a skipped output fails
  BENCH_OK(quant_gemm(qgemm_params(f, s, w, x, y, m, v, token_tile, row_tile), num_sms, nullptr));
  BENCH_OK(dequantize_bf16(dequant_params(f, s, w, deq), nullptr));
  BENCH_OK(gemm.linear(x, deq, y_ref, m, s.n, s.k, GemmOut::kBf16, nullptr));
  const size_t count = size_t(m) * s.n;
  std::vector<uint16_t> g(count), r(count);
  BENCH_CUDA(cudaMemcpy(g.data(), y, count * 2, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(r.data(), y_ref, count * 2, cudaMemcpyDeviceToHost));
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t gi = uint32_t{g[i]} << 16, ri = uint32_t{r[i]} << 16;
    float gf, rf;
    std::memcpy(&gf, &gi, 4);
    std::memcpy(&rf, &ri, 4);
    if (!std::isfinite(gf)) return INFINITY;
    d2 += double(gf - rf) * (gf - rf);
    r2 += double(rf) * rf;
  }
  return std::sqrt(d2 / std::max(r2, 1e-30));
}

// Rows whose kernels disagreed with deq+blas (FAILED in the table): run() exits 1 after the
// whole table when any did, so a probe variant (bench/gemm/NOTES.md) still measures every row.
int g_failed_rows = 0;

void run_shape(Gemm& gemm, const Shape& s, const std::vector<WeightFormat>& formats,
               const std::vector<int>& ms, int num_sms, size_t l2_bytes) {
  const int max_m = *std::max_element(ms.begin(), ms.end());
  void *x, *y, *y_ref, *deq;
  BENCH_CUDA(cudaMalloc(&x, size_t(max_m) * s.k * 2));
  BENCH_CUDA(cudaMalloc(&y, size_t(max_m) * s.n * 2));
  BENCH_CUDA(cudaMalloc(&y_ref, size_t(max_m) * s.n * 2));
  BENCH_CUDA(cudaMalloc(&deq, size_t(s.n) * s.k * 2));
  fill_bf16(x, size_t(max_m) * s.k, 7, 1.f);
  const std::vector<void*> bf16 = weight_copies(WeightFormat::kBf16, s, l2_bytes);
  for (WeightFormat f : formats) {
    if (!quant_gemm_supported(f, s.k)) continue;  // K-quants at SmolLM2's k = 576
    const std::vector<void*> q = weight_copies(f, s, l2_bytes);
    for (int m : ms) {
      const bool hopper = quant_gemm_wgmma_supported();
      const double err4 =
          validate(gemm, f, s, q[0], x, y, y_ref, deq, m, num_sms, QuantGemmKernel::kMmaSync);
      double err9 = 0.0;
      if (hopper) {
        for (int tile : {0, 64, 128, 256}) {
          err9 = std::max(err9, validate(gemm, f, s, q[0], x, y, y_ref, deq, m, num_sms,
                                         QuantGemmKernel::kWgmmaWs, tile));
        }
      }
      const double t_bf16 = time_calls([&](cudaStream_t st, int i) {
        BENCH_OK(gemm.linear(x, bf16[i % bf16.size()], y, m, s.n, s.k, GemmOut::kBf16, st));
      });
      const double t_deq = time_calls([&](cudaStream_t st, int i) {
        BENCH_OK(dequantize_bf16(dequant_params(f, s, q[i % q.size()], deq), st));
        BENCH_OK(gemm.linear(x, deq, y, m, s.n, s.k, GemmOut::kBf16, st));
      });
      auto time_kernel = [&](QuantGemmKernel v, int token_tile = 0, int row_tile = 0) {
        return time_calls([&](cudaStream_t st, int i) {
          BENCH_OK(quant_gemm(
              qgemm_params(f, s, q[i % q.size()], x, y, m, v, token_tile, row_tile), num_sms, st));
        });
      };
      // The narrow kernel where it takes k and m is in its range (up to 128 tokens: past
      // kAuto's limit, to see the crossover): its own tile, then every tile forced.
      double err_narrow = 0.0;
      char narrow_us[16] = "-", narrow_tiles_us[96] = "-";
      if (quant_gemm_narrow_supported(s.k) && m <= 128) {
        err_narrow = validate(gemm, f, s, q[0], x, y, y_ref, deq, m, num_sms, QuantGemmKernel::kNarrow);
        std::snprintf(narrow_us, sizeof(narrow_us), "%.1f", time_kernel(QuantGemmKernel::kNarrow) * 1e6);
        std::string tiles;
        for (const int rows : {16, 32}) {
          for (const int tokens : {16, 32, 64}) {
            char one[16] = "-";
            if (quant_gemm_narrow_supported(s.k, rows, tokens)) {
              err_narrow = std::max(err_narrow, validate(gemm, f, s, q[0], x, y, y_ref, deq, m,
                                                         num_sms, QuantGemmKernel::kNarrow,
                                                         tokens, rows));
              std::snprintf(one, sizeof(one), "%.1f",
                            time_kernel(QuantGemmKernel::kNarrow, tokens, rows) * 1e6);
            }
            tiles += (tiles.empty() ? "" : " / ") + std::string(one);
          }
        }
        std::snprintf(narrow_tiles_us, sizeof(narrow_tiles_us), "%s", tiles.c_str());
      }
      const double t_v4 = time_kernel(QuantGemmKernel::kMmaSync);
      const double t_v9 = hopper ? time_kernel(QuantGemmKernel::kWgmmaWs) : INFINITY;
      const double t_auto = time_kernel(QuantGemmKernel::kAuto);
      int auto_splits = 1;  // auto's k splits (1: k not split)
      BENCH_OK(quant_gemm(qgemm_params(f, s, q[0], x, y, m, QuantGemmKernel::kAuto), num_sms,
                          nullptr, &auto_splits));
      const double t_q = std::min(t_v4, t_v9);
      char v9_us[32] = "-", tiles_us[64] = "- | - | -";
      if (hopper) {
        std::snprintf(v9_us, sizeof(v9_us), "%.1f", t_v9 * 1e6);
        std::snprintf(tiles_us, sizeof(tiles_us), "%.1f | %.1f | %.1f",
                      time_kernel(QuantGemmKernel::kWgmmaWs, 64) * 1e6,
                      time_kernel(QuantGemmKernel::kWgmmaWs, 128) * 1e6,
                      time_kernel(QuantGemmKernel::kWgmmaWs, 256) * 1e6);
      }
      const double flops = 2.0 * m * s.n * s.k;
      const bool ok = err4 <= 1e-2 && err9 <= 1e-2 && err_narrow <= 1e-2;
      std::printf("| %s | %s | %d | %.1f | %.1f | %.1f | %s | %.1f | %s | %.0f | "
                  "%.2f | %.2f | %.2f | %.1e / %.1e / %.1e %s| %d | %s | %s |\n",
                  s.name, weight_format_name(f), m, t_bf16 * 1e6, t_deq * 1e6, t_v4 * 1e6,
                  v9_us, t_auto * 1e6, tiles_us, flops / t_q / 1e12,
                  t_bf16 / t_q, t_deq / t_q, t_v4 / t_q, err4, err9, err_narrow,
                  ok ? "" : "FAILED ", auto_splits, narrow_us, narrow_tiles_us);
      std::fflush(stdout);
      if (!ok) ++g_failed_rows;  // every row still measured; the exit status says it
    }
    for (void* w : q) BENCH_CUDA(cudaFree(w));
  }
  for (void* w : bf16) BENCH_CUDA(cudaFree(w));
  for (void* p : {x, y, y_ref, deq}) BENCH_CUDA(cudaFree(p));
}

constexpr Shape kShapes[] = {
    {"8B qkv 6144x4096", 6144, 4096},      {"8B o 4096x4096", 4096, 4096},
    {"8B gate_up 28672x4096", 28672, 4096}, {"8B down 4096x14336", 4096, 14336},
    {"8B v 1024x4096", 1024, 4096},  // Q4_K_M's Q6_K attn_v, launched beside [wq; wk]
    {"1B qkv 3072x2048", 3072, 2048},      {"1B o 2048x2048", 2048, 2048},
    {"1B gate_up 16384x2048", 16384, 2048}, {"1B down 2048x8192", 2048, 8192},
    {"1B v 512x2048", 512, 2048},  // Q4_K_M's Q6_K attn_v, launched beside [wq; wk]
    {"SmolLM2 qkv 960x576", 960, 576},       {"SmolLM2 o 576x576", 576, 576},
    {"SmolLM2 gate_up 3072x576", 3072, 576}, {"SmolLM2 down 576x1536", 576, 1536},
};

bool shape_selected(const Shape& s, const char* prefix) {
  return std::strncmp(s.name, prefix, std::strlen(prefix)) == 0;
}

void dequant_table(const std::vector<WeightFormat>& formats, const char* shapes_arg,
                   size_t l2_bytes) {
  const double copy = copy_bandwidth();
  std::printf("dequantize alone (GB/s: weight bytes read + bf16 bytes written; device-to-device "
              "copy %.0f GB/s)\n\n",
              copy / 1e9);
  std::printf("| shape | weights | MB moved | us | GB/s | of copy |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Shape& s : kShapes) {
    if (!shape_selected(s, shapes_arg)) continue;
    for (WeightFormat f : formats) {
      if (quant_gemm_supported(f, s.k)) dequant_row(s, f, l2_bytes, copy);
    }
  }
  std::printf("\n");
}

// The comma-separated integers of `arg` (the text after --ms=).
std::vector<int> int_list(const char* arg) {
  std::vector<int> out;
  for (const char* c = arg; *c != '\0';) {
    out.push_back(std::atoi(c));
    while (*c != '\0' && *c != ',') ++c;
    if (*c == ',') ++c;
  }
  return out;
}

int run(int argc, char** argv) {
  bool quick = false, dequant_only = false;
  const char* formats_arg = nullptr;
  const char* ms_arg = nullptr;
  const char* shapes_arg = "";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--dequant-only") == 0) {
      dequant_only = true;
    } else if (std::strncmp(argv[i], "--formats=", 10) == 0) {
      formats_arg = argv[i] + 10;
    } else if (std::strncmp(argv[i], "--ms=", 5) == 0) {
      ms_arg = argv[i] + 5;
    } else if (std::strncmp(argv[i], "--shapes=", 9) == 0) {
      shapes_arg = argv[i] + 9;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, L2 %.0f MB\n\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize / 1e6);
  std::vector<WeightFormat> formats =
      quick ? std::vector<WeightFormat>{WeightFormat::kQ4_K}
            : std::vector<WeightFormat>{WeightFormat::kQ4_K, WeightFormat::kQ6_K,
                                        WeightFormat::kQ8_0, WeightFormat::kQ4_0};
  if (formats_arg != nullptr) {
    formats.clear();
    for (WeightFormat f : {WeightFormat::kQ8_0, WeightFormat::kQ4_0, WeightFormat::kQ4_1,
                           WeightFormat::kQ4_K, WeightFormat::kQ5_K, WeightFormat::kQ6_K}) {
      if (std::strstr(formats_arg, weight_format_name(f)) != nullptr) formats.push_back(f);
    }
  }
  std::vector<int> ms = quick ? std::vector<int>{16, 32, 64, 128, 256, 512, 1024}
                              : std::vector<int>{16, 64, 128, 256, 512, 1024, 2048, 4096};
  if (ms_arg != nullptr) ms = int_list(ms_arg);
  if (formats.empty() || ms.empty()) {
    std::fprintf(stderr, "no format or no m selected\n");
    return 2;
  }
  const size_t l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  dequant_table(formats, shapes_arg, l2_bytes);
  if (dequant_only) return 0;
  std::printf("| shape | weights | m | bf16 us | deq+blas us | v4 us | v9 us | auto us | "
              "t64 us | t128 us | t256 us | best TFLOP/s | bf16/best | deq+blas/best | "
              "v4/best | rel. L2 vs deq+blas v4 / v9 (every tile) / narrow (every tile) | "
              "auto splits | narrow us | narrow r16 t16 / t32 / t64, r32 t16 / t32 / t64 us |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  g_partials_floats = quant_gemm_partials_floats(prop.multiProcessorCount);
  BENCH_CUDA(cudaMalloc(&g_partials, g_partials_floats * sizeof(float)));
  auto gemm = Gemm::create();
  BENCH_OK(gemm.status());
  for (const Shape& s : kShapes) {
    if (!shape_selected(s, shapes_arg)) continue;
    run_shape(**gemm, s, formats, ms, prop.multiProcessorCount, l2_bytes);
  }
  if (g_failed_rows > 0) {
    std::fprintf(stderr, "%d row(s) FAILED validation\n", g_failed_rows);
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace flashserve::kernels

int main(int argc, char** argv) { return flashserve::kernels::run(argc, argv); }
