// Launchers of kernels/quant/quant_gemv.h's GEMV (device code: quant_gemv.cuh).
#include <algorithm>
#include <cstdint>

#include "kernels/cuda_plumbing.cuh"
#include "kernels/quant/quant_gemv.cuh"
#include "kernels/quant/quant_gemv.h"

namespace flashserve::kernels {
namespace device::quant_gemv {
namespace {

int rows_bucket(int m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8; }

template <WeightFormat F, int kRows>
absl::Status launch(const GemvParams& p, int num_sms, cudaStream_t stream) {
  const int smem = staged_smem_bytes(kRows, p.k);
  auto* kernel = quant_gemv_kernel<F, kRows>;
  if (absl::Status s = set_smem_limit(kernel, smem); !s.ok()) return s;
  const int num_pairs = p.output == GemvOutput::kSwiglu ? p.n : (p.n + 1) / 2;
  const int sms = std::max(num_sms, 1), warps = cta_warps(num_pairs, sms);
  const int ctas = std::min((num_pairs + warps - 1) / warps, sms);
  CUDA_CHECK(launch_dependent(kernel, ctas, 32 * warps, smem, stream, p));
  return absl::OkStatus();
}

template <WeightFormat F>
absl::Status launch_format(const GemvParams& p, int num_sms, cudaStream_t stream) {
  switch (rows_bucket(p.m)) {
    case 1: return launch<F, 1>(p, num_sms, stream);
    case 2: return launch<F, 2>(p, num_sms, stream);
    case 4: return launch<F, 4>(p, num_sms, stream);
    default: return launch<F, 8>(p, num_sms, stream);
  }
}

}  // namespace
}  // namespace device::quant_gemv

bool quant_gemv_supported(WeightFormat f, int m, int k) {
  return f != WeightFormat::kBf16 && m >= 1 && m <= kGemvMaxRows && quant_layout_ok(f, k) &&
         device::quant_gemv::staged_smem_bytes(device::quant_gemv::rows_bucket(m), k) <=
             kQuantGemvMaxSmemBytes;
}

absl::Status quant_gemv(const GemvParams& p, int num_sms, cudaStream_t stream) {
  if (!quant_gemv_supported(p.w_format, p.m, p.k) || p.n < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quant_gemv: unsupported ", weight_format_name(p.w_format), " shape m ", p.m, ", n ",
        p.n, ", k ", p.k));
  }
  if (reinterpret_cast<uintptr_t>(p.w) % 16 != 0) {
    return absl::InvalidArgumentError("quant_gemv: the weight is not 16-byte aligned");
  }
  return quant::dispatch_quant_format(p.w_format, [&](auto tag) {
    return device::quant_gemv::launch_format<decltype(tag)::value>(p, num_sms, stream);
  });
}

}  // namespace flashserve::kernels
