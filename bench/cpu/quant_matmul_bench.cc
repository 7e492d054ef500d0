// Times one thread's quantized product y[m, n] = x[m, k] W[n, k]^T (kernels/cpu/
// quant_matmul.h) per instruction set, and OpenBLAS sgemm on the same weights dequantized,
// for SmolLM2-135M's projection shapes at m = 1 (decode) and m = 512 (prefill).
//   flashserve-cpu-matmul-bench [format] [wall|cpu]
//   (format: q4_1 default, q8_0, q4_0, q4_k, q5_k, q6_k)
// Prints per case, in microseconds and GFLOP/s (2 m n k flops), the median of 7 wall-clock
// timings (wall, the default) or the least of 7 thread CPU times (cpu: what a machine
// shared with other work still measures, since time descheduled is not counted).
#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_matmul.h"
#include "tests/support/quant_blocks.h"

namespace fk = flashserve::kernels;

bool g_cpu_time = false;  // the least thread CPU time instead of the median wall time

double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

template <typename F>
double median_us(F&& f) {
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    if (g_cpu_time) {
      const double start = thread_cpu_us();
      f();
      t.push_back(thread_cpu_us() - start);
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return g_cpu_time ? t[0] : t[3];
}

int main(int argc, char** argv) {
  const std::string want = argc > 1 ? argv[1] : "q4_1";
  g_cpu_time = argc > 2 && std::string(argv[2]) == "cpu";
  fk::WeightFormat f = fk::WeightFormat::kQ4_1;
  for (fk::WeightFormat g : {fk::WeightFormat::kQ8_0, fk::WeightFormat::kQ4_0,
                             fk::WeightFormat::kQ4_1, fk::WeightFormat::kQ4_K,
                             fk::WeightFormat::kQ5_K, fk::WeightFormat::kQ6_K}) {
    std::string name = fk::weight_format_name(g);
    for (char& ch : name) ch = static_cast<char>(std::tolower(ch));
    if (want == name) f = g;
  }
  openblas_set_num_threads(1);
  std::mt19937 rng(1);
  struct Shape { int n, k; const char* name; };
  const bool kq = fk::weight_block_elements(f) == 256;
  const Shape shapes[] = {{576, kq ? 512 : 576, "q/o"}, {1536, kq ? 512 : 576, "gate/up"},
                          {576, 1536, "down"}, {49152, kq ? 512 : 576, "lm head"}};
  std::printf("format %s; one thread; %s of 7 (us, GFLOP/s)\n", fk::weight_format_name(f),
              g_cpu_time ? "least thread CPU time" : "median wall time");
  std::printf("%-8s %5s %6s %6s | %-18s %-18s %-18s | %-18s\n", "shape", "m", "n", "k",
              "scalar", "avx2", "avx512", "sgemm (fp32 W)");
  for (const Shape& s : shapes) {
    for (int m : {1, 512}) {
      if (s.n == 49152 && m > 1) continue;
      const std::vector<uint8_t> w = fk::testing::random_ggml_tensor(f, s.n, s.k, rng);
      std::vector<float> wf(static_cast<size_t>(s.n) * s.k);
      (void)fk::dequantize_ggml_cpu(f, w.data(), int64_t{s.n} * s.k, wf.data());
      std::vector<float> x(static_cast<size_t>(m) * s.k);
      std::normal_distribution<float> dist;
      for (float& v : x) v = dist(rng);
      std::vector<float> y(static_cast<size_t>(m) * s.n);
      fk::Q8Activations a;
      const double flops = 2.0 * m * s.n * s.k;
      std::printf("%-8s %5d %6d %6d |", s.name, m, s.n, s.k);
      for (fk::CpuIsa isa : {fk::CpuIsa::kScalar, fk::CpuIsa::kAvx2, fk::CpuIsa::kAvx512}) {
        if (!fk::cpu_isa_runs(isa) || (isa == fk::CpuIsa::kScalar && m > 1)) {
          std::printf(" %-18s", "-");
          continue;
        }
        fk::quantize_activations_q8(x.data(), m, s.k, &a);  // the product alone is timed
        const double us = median_us([&] {
          fk::QuantMatmulParams p;
          p.format = f, p.w = w.data(), p.k = s.k, p.n_begin = 0, p.n_end = s.n;
          p.x = &a, p.y = y.data(), p.ldy = s.n;
          fk::quant_matmul_cpu(isa, p);
        });
        std::printf(" %8.0f %7.1f  ", us, flops / us / 1e3);
      }
      const double us = median_us([&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, s.n, s.k, 1.f, x.data(), s.k,
                    wf.data(), s.k, 0.f, y.data(), s.n);
      });
      std::printf(" | %8.0f %7.1f\n", us, flops / us / 1e3);
    }
  }
  return 0;
}
