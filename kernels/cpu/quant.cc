#include "kernels/cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/bf16.h"
#include "kernels/cpu/quant_matmul_internal.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/quant/quant_unit.h"

namespace flashserve::kernels {
namespace {

float fp16(const uint8_t* p) { return quant::half_bits_to_float(uint32_t{p[0]} | uint32_t{p[1]} << 8); }

void dequantize_legacy(WeightFormat f, const uint8_t* b, float* y) {
  if (f == WeightFormat::kQ8_0) {
    const float d = fp16(b);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
  } else if (f == WeightFormat::kQ4_0) {
    const float d = fp16(b);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((b[2 + j] & 15) - 8) * d;
      y[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
    }
  } else {  // Q4_1
    const float d = fp16(b), m = fp16(b + 2);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(b[4 + j] & 15) * d + m;
      y[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + m;
    }
  }
}

// Q4_K (qh == nullptr) and Q5_K: four groups of 64, each the low then the high nibbles of
// 32 bytes, with scales 2g and 2g + 1.
void dequantize_q45_k(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, float* y) {
  const float d = fp16(b), dmin = fp16(b + 2);
  const uint8_t* scales = b + 4;
  for (int g = 0; g < 4; ++g) {
    int sc, mn;
    qmm::k_scale_min(scales, 2 * g, &sc, &mn);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
    qmm::k_scale_min(scales, 2 * g + 1, &sc, &mn);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
    for (int l = 0; l < 32; ++l) {
      const int hi = qh != nullptr ? ((qh[l] >> (2 * g)) & 1) << 4 : 0;
      *y++ = d1 * static_cast<float>((qs[l] & 15) + hi) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int hi = qh != nullptr ? ((qh[l] >> (2 * g + 1)) & 1) << 4 : 0;
      *y++ = d2 * static_cast<float>((qs[l] >> 4) + hi) - m2;
    }
    qs += 32;
  }
}

void dequantize_q6_k(const uint8_t* b, float* y) {
  const float d = fp16(b + 208);
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  for (int n = 0; n < 2; ++n) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

absl::Status dequantize_ggml_cpu(WeightFormat f, const uint8_t* src, int64_t num_elements,
                                 float* dst) {
  if (f == WeightFormat::kBf16) return absl::UnimplementedError("dequantize_ggml_cpu: bf16");
  const int64_t be = weight_block_elements(f), bb = weight_block_bytes(f);
  if (num_elements < 0 || num_elements % be != 0) {
    return absl::InvalidArgumentError(absl::StrCat("dequantize_ggml_cpu: ", num_elements,
                                                   " elements of ", weight_format_name(f)));
  }
  for (int64_t i = 0; i < num_elements / be; ++i) {
    const uint8_t* b = src + i * bb;
    float* y = dst + i * be;
    switch (f) {
      case WeightFormat::kQ4_K: dequantize_q45_k(b, nullptr, b + 16, y); break;
      case WeightFormat::kQ5_K: dequantize_q45_k(b, b + 16, b + 48, y); break;
      case WeightFormat::kQ6_K: dequantize_q6_k(b, y); break;
      default: dequantize_legacy(f, b, y); break;
    }
  }
  return absl::OkStatus();
}

void quantize_q8_cpu(const float* x, int64_t k, int8_t* q, float* d) {
  for (int64_t u = 0; u < k / kQuantUnit; ++u) {
    const float* v = x + u * kQuantUnit;
    float amax = 0;
    for (int i = 0; i < kQuantUnit; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float dx = amax / 127.f;
    const float id = dx > 0 ? 1.f / dx : 0.f;
    d[u] = dx;
    for (int i = 0; i < kQuantUnit; ++i) {
      q[u * kQuantUnit + i] = static_cast<int8_t>(std::nearbyint(v[i] * id));
    }
  }
}

absl::Status quant_gemv_cpu(const GemvCpuParams& p, WeightFormat f, const uint8_t* w_ggml) {
  const int64_t k = p.k;
  const int64_t w_rows = p.output == GemvOutput::kSwiglu ? 2 * int64_t{p.n} : p.n;
  std::vector<float> w(static_cast<size_t>(w_rows * k));
  if (absl::Status s = dequantize_ggml_cpu(f, w_ggml, w_rows * k, w.data()); !s.ok()) return s;
  std::vector<float> x = gemv_input_rows_cpu(p);
  std::vector<int8_t> q(static_cast<size_t>(k));
  std::vector<float> d(static_cast<size_t>(k / kQuantUnit));
  for (int r = 0; r < p.m; ++r) {
    float* row = x.data() + r * k;
    quantize_q8_cpu(row, k, q.data(), d.data());
    for (int64_t i = 0; i < k; ++i) row[i] = d[i / kQuantUnit] * static_cast<float>(q[i]);
  }
  GemvCpuParams g = p;
  g.input = GemvInput::kBf16;
  g.x = x.data();
  g.rows = nullptr;
  g.w = w.data();
  gemv_cpu(g);
  return absl::OkStatus();
}

}  // namespace flashserve::kernels
