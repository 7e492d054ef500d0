// bench/gemm/gemm_bench_util.h
#include "bench/gemm/gemm_bench_util.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <vector>

namespace flashserve::kernels::bench {
namespace {


__device__ uint32_t hash32(uint64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 0x9e3779b9u ^ seed ^ static_cast<uint32_t>(i >> 32);
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

// Random bytes in [begin, end) of a tensor, as 16-bit words; `scales`: fp16 values in
// [2^-9, 2^-8) (any bits would time the same; finite ones keep the validation meaningful).
__global__ void fill_words(uint16_t* p, size_t begin, size_t end, uint32_t seed, bool scales) {
  for (size_t i = begin + blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < end;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint32_t h = hash32(i, seed);
    p[i] = scales ? static_cast<uint16_t>(0x1800u | (h & 0x3ffu)) : static_cast<uint16_t>(h);
  }
}

// bf16 N(0, ~1) values (sums of two uniforms), for activations and bf16 weights (scaled).
__global__ void fill_bf16_kernel(__nv_bfloat16* x, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x) {
    const uint32_t h = hash32(i, seed);
    const float u = ((h & 0xffffu) + (h >> 16)) * 0x1p-16f - 1.f;
    x[i] = __float2bfloat16_rn(u * 2.45f * scale);
  }
}

}  // namespace

void fill_bf16(void* x, size_t n, uint32_t seed, float scale) {
  fill_bf16_kernel<<<1024, 256>>>(static_cast<__nv_bfloat16*>(x), n, seed, scale);
}

// One weight tensor on the device, in `format`, [rows, k].
void fill_weight(WeightFormat f, void* w, int64_t rows, int64_t k, uint32_t seed) {
  if (f == WeightFormat::kBf16) {
    fill_bf16_kernel<<<1024, 256>>>(static_cast<__nv_bfloat16*>(w), size_t(rows) * k, seed, 0.02f);
    return;
  }
  const QuantLayout l = quant_layout(f, rows, k);
  uint16_t* p = static_cast<uint16_t*>(w);
  fill_words<<<1024, 256>>>(p, 0, size_t(l.scale_offset) / 2, seed, false);
  fill_words<<<1024, 256>>>(p, size_t(l.scale_offset) / 2, size_t(l.total_bytes) / 2, seed, true);
}

int64_t weight_bytes(WeightFormat f, int64_t rows, int64_t k) {
  return f == WeightFormat::kBf16 ? rows * k * 2 : quant_layout(f, rows, k).total_bytes;
}

double copy_bandwidth() {
  const size_t bytes = size_t{1} << 30;
  void *a, *b;
  BENCH_CUDA(cudaMalloc(&a, bytes));
  BENCH_CUDA(cudaMalloc(&b, bytes));
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  BENCH_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    BENCH_CUDA(cudaEventRecord(start));
    BENCH_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
    BENCH_CUDA(cudaEventRecord(stop));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms * 1e-3);
  }
  std::sort(t.begin(), t.end());
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  BENCH_CUDA(cudaFree(a));
  BENCH_CUDA(cudaFree(b));
  return 2.0 * bytes / t[t.size() / 2];  // read + write
}

double time_graph(int calls, int reps, const std::function<void(cudaStream_t, int)>& call) {
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  call(stream, 0);
  BENCH_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; ++i) call(stream, i);
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  BENCH_CUDA(cudaGraphLaunch(exec, stream));  // warm-up
  std::vector<double> t;
  for (int rep = 0; rep < reps; ++rep) {
    BENCH_CUDA(cudaEventRecord(start, stream));
    BENCH_CUDA(cudaGraphLaunch(exec, stream));
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms * 1e-3 / calls);
  }
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  BENCH_CUDA(cudaGraphDestroy(graph));
  BENCH_CUDA(cudaStreamDestroy(stream));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace flashserve::kernels::bench
