// Decode-GEMV benchmark: kernels::gemv on bf16 weights and on every quantized format
// (kernels/quant/quant_gemv.h) at the linear-layer shapes of Llama 3 8B and 3.2 1B, m in
// {1, 2, 4, 8} tokens. See bench/gemm/NOTES.md for the bytes floor and the predictions.
//
// Every (shape, format) is validated before it is timed: the quantized GEMV against the
// bf16 GEMV on the same weights dequantized by dequantize_bf16 (which the unit tests check
// bit for bit against ggml): relative L2 error <= 3 % (the int8 rounding of the
// activations, ~0.5 % per dot product and up to twice that through SwiGLU, is the whole
// expected difference), all finite.
// Timing: the weights are cycled through enough copies to fill 8x the L2 (so every launch
// reads them from HBM, as a decode step does), 64 launches are captured in a CUDA graph
// with programmatic dependent launch (as the decode step runs them) and the graph is
// replayed; median over 7 replays of time per launch. Bytes = the weight tensor as stored
// (quant_layout's total_bytes, ~the file's bytes) + the activations read + the outputs
// written: the least traffic a GEMV can make. GB/s and % of the H200's 4.8 TB/s datasheet
// figure, and of the device-to-device copy bandwidth measured here.
//
//   quant_gemv_bench [--quick]      (--quick: m = 1 only)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gemv.h"
#include "kernels/quant/quant_gemv.h"
#include "kernels/quant/quant_layout.h"
#include "bench/gemm/gemm_bench_util.h"

namespace flashserve::kernels {
namespace {

using namespace bench;  // NOLINT: the bench plumbing

struct Shape {
  const char* name;
  int n, k;
  bool swiglu;  // the fused gate/up projection: 2n weight rows, n outputs
};

struct Buffers {
  std::vector<void*> copies;  // weight copies cycled through
  void* x = nullptr;          // bf16 [8, k]
  void* y = nullptr;          // fp32 [8, n]
  void* y_ref = nullptr;      // fp32 [8, n]
  void* w_bf16 = nullptr;     // the dequantized weight, for validation
};

GemvParams params(const Shape& s, WeightFormat f, const void* w, void* x, void* y, int m) {
  GemvParams p;
  p.input = GemvInput::kBf16;
  p.x = x;
  p.w = w;
  p.w_format = f;
  p.output = s.swiglu ? GemvOutput::kSwiglu : GemvOutput::kFp32;
  p.y = y;
  p.m = m;
  p.n = s.n;
  p.k = s.k;
  return p;
}

// Relative L2 distance of the quantized GEMV from the bf16 GEMV on the dequantized weight.
double validate(const Shape& s, WeightFormat f, const Buffers& b, int m, int num_sms) {
  const int64_t rows = s.swiglu ? 2 * int64_t{s.n} : s.n;
  if (f != WeightFormat::kBf16) {
    DequantizeParams d;
    d.format = f;
    d.w = b.copies[0];
    d.num_rows = rows;
    d.k = s.k;
    d.row_begin = 0;
    d.row_end = rows;
    d.out = b.w_bf16;
    BENCH_OK(dequantize_bf16(d, nullptr));
  } else {
    BENCH_CUDA(cudaMemcpy(b.w_bf16, b.copies[0], rows * s.k * 2, cudaMemcpyDeviceToDevice));
  }
  const size_t count = size_t(m) * s.n;
  BENCH_OK(gemv(params(s, f, b.copies[0], b.x, b.y, m), num_sms, nullptr));
  // The bf16 reference in chunks of rows it supports (its staged rows are 2 bytes each).
  int chunk = m;
  while (!gemv_supported(WeightFormat::kBf16, chunk, s.k)) chunk /= 2;
  const int out_bytes = s.swiglu ? 2 : 4;
  for (int r0 = 0; r0 < m; r0 += chunk) {
    void* x = static_cast<char*>(b.x) + size_t(r0) * s.k * 2;
    void* y = static_cast<char*>(b.y_ref) + size_t(r0) * s.n * out_bytes;
    BENCH_OK(gemv(params(s, WeightFormat::kBf16, b.w_bf16, x, y, std::min(chunk, m - r0)),
                  num_sms, nullptr));
  }
  // SwiGLU outputs are bf16: compare as floats after conversion.
  std::vector<float> got(count), ref(count);
  if (s.swiglu) {
    std::vector<uint16_t> g(count), r(count);
    BENCH_CUDA(cudaMemcpy(g.data(), b.y, count * 2, cudaMemcpyDeviceToHost));
    BENCH_CUDA(cudaMemcpy(r.data(), b.y_ref, count * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) {
      const uint32_t gi = uint32_t{g[i]} << 16, ri = uint32_t{r[i]} << 16;
      std::memcpy(&got[i], &gi, 4);
      std::memcpy(&ref[i], &ri, 4);
    }
  } else {
    BENCH_CUDA(cudaMemcpy(got.data(), b.y, count * 4, cudaMemcpyDeviceToHost));
    BENCH_CUDA(cudaMemcpy(ref.data(), b.y_ref, count * 4, cudaMemcpyDeviceToHost));
  }
  double d2 = 0, r2 = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    d2 += double(got[i] - ref[i]) * (got[i] - ref[i]);
    r2 += double(ref[i]) * ref[i];
  }
  return std::sqrt(d2 / std::max(r2, 1e-30));
}

// Median seconds per launch: a graph of 64 launches cycling through the copies, 7 replays.
double time_launches(const Shape& s, WeightFormat f, const Buffers& b, int m, int num_sms) {
  return time_graph(64, 7, [&](cudaStream_t stream, int i) {
    BENCH_OK(gemv(params(s, f, b.copies[i % b.copies.size()], b.x, b.y, m), num_sms, stream));
  });
}

void run_shape(const Shape& s, const std::vector<int>& ms, int num_sms, size_t l2_bytes,
               double copy_bw) {
  const int64_t rows = s.swiglu ? 2 * int64_t{s.n} : s.n;
  const WeightFormat formats[] = {WeightFormat::kBf16, WeightFormat::kQ8_0, WeightFormat::kQ6_K,
                                  WeightFormat::kQ5_K, WeightFormat::kQ4_1, WeightFormat::kQ4_0,
                                  WeightFormat::kQ4_K};
  Buffers b;
  BENCH_CUDA(cudaMalloc(&b.x, size_t{8} * s.k * 2));
  BENCH_CUDA(cudaMalloc(&b.y, size_t{8} * s.n * 4));
  BENCH_CUDA(cudaMalloc(&b.y_ref, size_t{8} * s.n * 4));
  BENCH_CUDA(cudaMalloc(&b.w_bf16, size_t(rows) * s.k * 2));
  fill_bf16(b.x, size_t{8} * s.k, 7, 1.f);
  for (WeightFormat f : formats) {
    const int64_t wb = weight_bytes(f, rows, s.k);
    const int copies = static_cast<int>(std::clamp<int64_t>(8 * l2_bytes / wb + 1, 1, 64));
    for (int c = 0; c < copies; ++c) {
      void* w;
      BENCH_CUDA(cudaMalloc(&w, wb));
      fill_weight(f, w, rows, s.k, 1000 + c);
      b.copies.push_back(w);
    }
    for (int m : ms) {
      if (!gemv_supported(f, m, s.k)) {
        std::printf("| %s | %s | %d | (unsupported: staged rows past shared memory) |\n", s.name,
                    weight_format_name(f), m);
        continue;
      }
      const double err = validate(s, f, b, m, num_sms);
      const double sec = time_launches(s, f, b, m, num_sms);
      const double bytes = double(wb) + double(m) * s.k * 2 + double(m) * s.n * (s.swiglu ? 2 : 4);
      std::printf("| %s | %s | %d | %.1f | %.2f | %.2f | %.0f | %.1f %% | %.1f %% | %.2g %s|\n",
                  s.name, weight_format_name(f), m, wb / 1e6, bytes / kDatasheetBytesPerSecond * 1e6,
                  sec * 1e6, bytes / sec / 1e9, 100 * bytes / sec / kDatasheetBytesPerSecond,
                  100 * bytes / sec / copy_bw, err, err <= 3e-2 ? "" : "FAILED ");
      std::fflush(stdout);
      if (!(err <= 3e-2)) std::exit(1);
    }
    for (void* w : b.copies) BENCH_CUDA(cudaFree(w));
    b.copies.clear();
  }
  BENCH_CUDA(cudaFree(b.x));
  BENCH_CUDA(cudaFree(b.y));
  BENCH_CUDA(cudaFree(b.y_ref));
  BENCH_CUDA(cudaFree(b.w_bf16));
}

int run(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  cudaDeviceProp prop;
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  const double copy_bw = copy_bandwidth();
  std::printf("device %s, %d SMs, L2 %.0f MB, device-to-device copy %.0f GB/s (read + write)\n\n",
              prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6, copy_bw / 1e9);
  std::printf("| shape | weights | m | MB | floor us | us | GB/s | of 4.8 TB/s | of copy | rel. err |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  const Shape shapes[] = {
      {"8B qkv 6144x4096", 6144, 4096, false},   {"8B o 4096x4096", 4096, 4096, false},
      {"8B gate_up 2x14336x4096", 14336, 4096, true}, {"8B down 4096x14336", 4096, 14336, false},
      {"1B qkv 3072x2048", 3072, 2048, false},   {"1B o 2048x2048", 2048, 2048, false},
      {"1B gate_up 2x8192x2048", 8192, 2048, true},   {"1B down 2048x8192", 2048, 8192, false},
  };
  const std::vector<int> ms = quick ? std::vector<int>{1} : std::vector<int>{1, 2, 4, 8};
  for (const Shape& s : shapes) {
    run_shape(s, ms, prop.multiProcessorCount, static_cast<size_t>(prop.l2CacheSize), copy_bw);
  }
  return 0;
}

}  // namespace
}  // namespace flashserve::kernels

int main(int argc, char** argv) { return flashserve::kernels::run(argc, argv); }
