// dequantize_bf16() of kernels/quant/quant_gemv.h: one thread per unit of 32 elements reads
// the unit's words of the repacked layout (the loads of the GEMV, kernels/quant/
// quant_gemv.cuh), decodes them with kernels/quant/quant_unit.h and writes 64 bytes of bf16.
// Bandwidth-bound: ~0.56 (Q4) + 2 bytes of traffic per element.
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/quant/quant_gemv.cuh"
#include "kernels/quant/quant_gemv.h"

namespace flashserve::kernels {
namespace device::quant_gemv {
namespace {

constexpr int kDequantThreads = 256;

template <WeightFormat F>
__global__ void __launch_bounds__(kDequantThreads) dequantize_kernel(const DequantizeParams p) {
  const int64_t units = p.k / kQuantUnit;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kDequantThreads + threadIdx.x;
  if (item >= (p.row_end - p.row_begin) * units) {
    allow_next_grid();
    return;
  }
  int64_t row = p.row_begin + item / units;
  // A gather's ids may come from the previous kernel: read them after it.
  if (p.row_ids != nullptr) {
    wait_for_prior_grid();
    row = p.row_ids[item / units];
  }
  const int u = static_cast<int>(item % units);
  const QuantLayout l = quant_layout(F, p.num_rows, p.k);
  UnitRaw raw;
  load_unit<F>(row_ptrs<F>(static_cast<const uint8_t*>(p.w), l, static_cast<int>(row)), l, u, raw);
  // The weights are written by no kernel of a step: loaded before the wait, as the GEMV does.
  wait_for_prior_grid();
  allow_next_grid();
  const Unit w = quant::decode_unit<F>(raw, u);
  if (p.out_fp32) {
    float4* dst = reinterpret_cast<float4*>(static_cast<float*>(p.out) + item * kQuantUnit);
#pragma unroll
    for (int e = 0; e < kQuantUnit; e += 4) {
      dst[e / 4] = make_float4(quant::unit_element<F>(w, e), quant::unit_element<F>(w, e + 1),
                               quant::unit_element<F>(w, e + 2), quant::unit_element<F>(w, e + 3));
    }
    return;
  }
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
}  // namespace device::quant_gemv

absl::Status dequantize_bf16(const DequantizeParams& p, cudaStream_t stream) {
  if (p.format == WeightFormat::kBf16 || !quant_layout_ok(p.format, p.k) || p.num_rows < 1 ||
      p.row_begin < 0 || p.row_end <= p.row_begin ||
      (p.row_ids == nullptr && p.row_end > p.num_rows) || (p.row_ids != nullptr && p.row_begin != 0) ||
      p.num_rows > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dequantize_bf16: unsupported ", weight_format_name(p.format), " tensor ", p.num_rows,
        " x ", p.k, " rows [", p.row_begin, ", ", p.row_end, ")"));
  }
  if (p.w == nullptr || p.out == nullptr || reinterpret_cast<uintptr_t>(p.w) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.out) % 16 != 0) {
    return absl::InvalidArgumentError("dequantize_bf16: a pointer is null or not 16-byte aligned");
  }
  const int64_t items = (p.row_end - p.row_begin) * (p.k / kQuantUnit);
  const int64_t blocks = (items + device::quant_gemv::kDequantThreads - 1) /
                         device::quant_gemv::kDequantThreads;
  return quant::dispatch_quant_format(p.format, [&](auto tag) -> absl::Status {
    CUDA_CHECK(device::launch_dependent(
        device::quant_gemv::dequantize_kernel<decltype(tag)::value>,
        static_cast<unsigned>(blocks), device::quant_gemv::kDequantThreads, 0, stream, p));
    return absl::OkStatus();
  });
}

}  // namespace flashserve::kernels
