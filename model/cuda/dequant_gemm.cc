#include "model/cuda/dequant_gemm.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/quant/quant_gemv.h"

namespace flashserve::model::cuda {

int64_t dequant_chunk_bytes(int64_t l2_bytes) { return l2_bytes / 2; }

int64_t dequant_chunk_rows(int64_t rows, int64_t k, int64_t chunk_bytes) {
  const int64_t row_bytes = 2 * k;
  const int64_t chunks = std::max<int64_t>(1, (rows * row_bytes + chunk_bytes - 1) / chunk_bytes);
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  return std::min(rows, std::max<int64_t>(128, (per_chunk + 127) / 128 * 128));
}

int64_t dequant_gemm_scratch_bytes(std::span<const QuantPart> parts, int64_t k,
                                   int64_t chunk_bytes) {
  int64_t bytes = 0;
  for (const QuantPart& p : parts) {
    bytes = std::max(bytes, dequant_chunk_rows(p.rows, k, chunk_bytes) * k * 2);
  }
  return bytes;
}

absl::Status dequant_gemm(Gemm& gemm, std::span<const QuantPart> parts, const void* x, void* y,
                          int m, int k, GemmOut out, void* scratch, int64_t scratch_bytes,
                          int64_t chunk_bytes, cudaStream_t stream) {
  const int64_t need = dequant_gemm_scratch_bytes(parts, k, chunk_bytes);
  if (scratch_bytes < need) {
    return absl::InvalidArgumentError(absl::StrCat("dequant_gemm: scratch of ", scratch_bytes,
                                                   " bytes, ", need, " needed"));
  }
  int64_t n = 0;
  for (const QuantPart& p : parts) n += p.rows;
  const int64_t elem_bytes = out == GemmOut::kBf16 ? 2 : 4;
  int64_t col = 0;
  for (const QuantPart& p : parts) {
    const int64_t step = dequant_chunk_rows(p.rows, k, chunk_bytes);
    for (int64_t r = 0; r < p.rows; r += step) {
      const int64_t r_end = std::min(p.rows, r + step);
      kernels::DequantizeParams d;
      d.format = p.format;
      d.w = p.w;
      d.num_rows = p.rows;
      d.k = k;
      d.row_begin = r;
      d.row_end = r_end;
      d.out = scratch;
      RETURN_IF_ERROR(kernels::dequantize_bf16(d, stream));
      RETURN_IF_ERROR(gemm.linear(x, scratch, static_cast<char*>(y) + (col + r) * elem_bytes, m,
                                  static_cast<int>(r_end - r), k, out, stream,
                                  static_cast<int>(n)));
    }
    col += p.rows;
  }
  return absl::OkStatus();
}

}  // namespace flashserve::model::cuda
