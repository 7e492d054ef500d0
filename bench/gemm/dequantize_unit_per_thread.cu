// See dequantize_unit_per_thread.h: the one-thread-per-unit dequantize kernel, as
// kernels/quant/quant_dequantize.cu had it before the staged stores (bf16 output only).
#include <cuda_bf16.h>

#include <cstdint>

#include "bench/gemm/dequantize_unit_per_thread.h"
#include "kernels/cuda_plumbing.cuh"
#include "kernels/quant/quant_gemv.cuh"

namespace flashserve::kernels::bench {
namespace {

using device::allow_next_grid;
using device::wait_for_prior_grid;
using device::quant_gemv::load_unit;
using device::quant_gemv::row_ptrs;
using quant::Unit;
using quant::UnitRaw;

constexpr int kThreads = 256;

template <WeightFormat F>
__global__ void __launch_bounds__(kThreads) unit_per_thread_kernel(const DequantizeParams p) {
  const int64_t units = p.k / kQuantUnit;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (item >= (p.row_end - p.row_begin) * units) {
    allow_next_grid();
    return;
  }
  const int64_t row = p.row_begin + item / units;
  const int u = static_cast<int>(item % units);
  const QuantLayout l = quant_layout(F, p.num_rows, p.k);
  UnitRaw raw;
  load_unit<F>(row_ptrs<F>(static_cast<const uint8_t*>(p.w), l, static_cast<int>(row)), l, u, raw);
  wait_for_prior_grid();
  allow_next_grid();
  const Unit w = quant::decode_unit<F>(raw, u);
  uint32_t out[16];
#pragma unroll
  for (int e = 0; e < kQuantUnit; e += 2) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(quant::unit_element<F>(w, e),
                                                   quant::unit_element<F>(w, e + 1));
    out[e / 2] = *reinterpret_cast<const uint32_t*>(&b);
  }
  uint4* dst = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(p.out) + item * kQuantUnit);
#pragma unroll
  for (int i = 0; i < 4; ++i) dst[i] = make_uint4(out[4 * i], out[4 * i + 1], out[4 * i + 2], out[4 * i + 3]);
}

}  // namespace

absl::Status dequantize_unit_per_thread(const DequantizeParams& p, cudaStream_t stream) {
  if (p.format == WeightFormat::kBf16 || p.row_ids != nullptr || p.out_fp32 ||
      !quant_layout_ok(p.format, p.k) || p.row_begin < 0 || p.row_end <= p.row_begin ||
      p.row_end > p.num_rows) {
    return absl::InvalidArgumentError("dequantize_unit_per_thread: unsupported parameters");
  }
  const int64_t items = (p.row_end - p.row_begin) * (p.k / kQuantUnit);
  const int64_t blocks = (items + kThreads - 1) / kThreads;
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    CUDA_CHECK(device::launch_dependent(unit_per_thread_kernel<decltype(tag)::value>,
                                        static_cast<unsigned>(blocks), kThreads, 0, stream, p));
    return absl::OkStatus();
  });
}

}  // namespace flashserve::kernels::bench
