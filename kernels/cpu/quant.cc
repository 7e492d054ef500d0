#include "kernels/cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/bf16.h"
#include "base/status_macros.h"
#include "kernels/cpu/quant_matmul_internal.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/quant/quant_unit.h"

namespace flashserve::kernels {
namespace {

float fp16(const uint8_t* p) { return quant::half_bits_to_float(uint32_t{p[0]} | uint32_t{p[1]} << 8); }

// One ggml element as ggml computes it: value = a * q (Q8_0, Q4_0, Q6_K: q already less
// its offset) or a * q + c (Q4_1, Q4_K, Q5_K), fp32 operations in that order.
struct Parts {
  int q;
  float a, c;
};

bool has_offset(WeightFormat f) {
  return f == WeightFormat::kQ4_1 || f == WeightFormat::kQ4_K || f == WeightFormat::kQ5_K;
}

void parts_legacy(WeightFormat f, const uint8_t* b, Parts* y) {
  const float d = fp16(b);
  if (f == WeightFormat::kQ8_0) {
    for (int j = 0; j < 32; ++j) y[j] = {static_cast<int8_t>(b[2 + j]), d, 0.f};
  } else if (f == WeightFormat::kQ4_0) {
    for (int j = 0; j < 16; ++j) {
      y[j] = {(b[2 + j] & 15) - 8, d, 0.f};
      y[j + 16] = {(b[2 + j] >> 4) - 8, d, 0.f};
    }
  } else {  // Q4_1
    const float m = fp16(b + 2);
    for (int j = 0; j < 16; ++j) {
      y[j] = {b[4 + j] & 15, d, m};
      y[j + 16] = {b[4 + j] >> 4, d, m};
    }
  }
}

// Q4_K (qh == nullptr) and Q5_K: four groups of 64, each the low then the high nibbles of
// 32 bytes, with scales 2g and 2g + 1.
void parts_q45_k(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, Parts* y) {
  const float d = fp16(b), dmin = fp16(b + 2);
  const uint8_t* scales = b + 4;
  for (int g = 0; g < 4; ++g) {
    for (int half = 0; half < 2; ++half) {
      int sc, mn;
      qmm::k_scale_min(scales, 2 * g + half, &sc, &mn);
      const float a = d * static_cast<float>(sc), c = -(dmin * static_cast<float>(mn));
      for (int l = 0; l < 32; ++l) {
        const int hi = qh != nullptr ? ((qh[l] >> (2 * g + half)) & 1) << 4 : 0;
        *y++ = {(half == 0 ? qs[l] & 15 : qs[l] >> 4) + hi, a, c};
      }
    }
    qs += 32;
  }
}

void parts_q6_k(const uint8_t* b, Parts* y) {
  const float d = fp16(b + 208);
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  for (int n = 0; n < 2; ++n) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      y[l] = {((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32, d * static_cast<float>(sc[is]), 0.f};
      y[l + 32] = {((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32,
                   d * static_cast<float>(sc[is + 2]), 0.f};
      y[l + 64] = {((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32, d * static_cast<float>(sc[is + 4]), 0.f};
      y[l + 96] = {((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32,
                   d * static_cast<float>(sc[is + 6]), 0.f};
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// The parts of every element of num_elements (whole blocks, checked by the caller).
std::vector<Parts> ggml_parts(WeightFormat f, const uint8_t* src, int64_t num_elements) {
  const int64_t be = weight_block_elements(f), bb = weight_block_bytes(f);
  std::vector<Parts> parts(static_cast<size_t>(num_elements));
  for (int64_t i = 0; i < num_elements / be; ++i) {
    const uint8_t* b = src + i * bb;
    Parts* y = parts.data() + i * be;
    switch (f) {
      case WeightFormat::kQ4_K: parts_q45_k(b, nullptr, b + 16, y); break;
      case WeightFormat::kQ5_K: parts_q45_k(b, b + 16, b + 48, y); break;
      case WeightFormat::kQ6_K: parts_q6_k(b, y); break;
      default: parts_legacy(f, b, y); break;
    }
  }
  return parts;
}

absl::Status check_elements(const char* op, WeightFormat f, int64_t num_elements) {
  if (f == WeightFormat::kBf16) return absl::UnimplementedError(absl::StrCat(op, ": bf16"));
  if (num_elements < 0 || num_elements % weight_block_elements(f) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": ", num_elements, " elements of ", weight_format_name(f)));
  }
  return absl::OkStatus();
}

// x rounded to nearest-even bf16 from a double (one rounding: the value is exact in double).
float double_to_bf16(double x) {
  if (x == 0 || !std::isfinite(x)) return static_cast<float>(x);
  int e;
  const double m = std::frexp(x, &e);  // |m| in [0.5, 1): 8 significant bits kept
  const double scaled = std::nearbyint(std::ldexp(m, 8));  // round-half-even (default mode)
  return static_cast<float>(std::ldexp(scaled, e - 8));
}

}  // namespace

absl::Status dequantize_ggml_cpu(WeightFormat f, const uint8_t* src, int64_t num_elements,
                                 float* dst) {
  RETURN_IF_ERROR(check_elements("dequantize_ggml_cpu", f, num_elements));
  const std::vector<Parts> parts = ggml_parts(f, src, num_elements);
  const bool offset = has_offset(f);
  for (int64_t i = 0; i < num_elements; ++i) {
    const Parts& p = parts[i];
    const float aq = p.a * static_cast<float>(p.q);
    dst[i] = offset ? aq + p.c : aq;
  }
  return absl::OkStatus();
}

absl::Status dequantize_gemm_cpu(WeightFormat f, const uint8_t* src, int64_t num_elements,
                                 float* dst) {
  RETURN_IF_ERROR(check_elements("dequantize_gemm_cpu", f, num_elements));
  if (f == WeightFormat::kQ8_0) {
    RETURN_IF_ERROR(dequantize_ggml_cpu(f, src, num_elements, dst));
    for (int64_t i = 0; i < num_elements; ++i) dst[i] = round_to_bf16(dst[i]);
    return absl::OkStatus();
  }
  const std::vector<Parts> parts = ggml_parts(f, src, num_elements);
  const bool offset = has_offset(f);
  for (int64_t i = 0; i < num_elements; ++i) {
    const Parts& p = parts[i];
    const double aq = static_cast<double>(p.q) * round_to_bf16(p.a);  // exact
    dst[i] = double_to_bf16(offset ? aq + round_to_bf16(p.c) : aq);
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

absl::Status quant_gemm_cpu(const GemvCpuParams& p, WeightFormat f, const uint8_t* w_ggml) {
  if (p.input != GemvInput::kBf16 || p.rows != nullptr ||
      (p.output != GemvOutput::kBf16 && p.output != GemvOutput::kFp32 &&
       p.output != GemvOutput::kFp32Accumulate)) {
    return absl::InvalidArgumentError("quant_gemm_cpu: bf16 input rows and a bf16/fp32 output only");
  }
  const int64_t elements = int64_t{p.n} * p.k;
  std::vector<float> w(static_cast<size_t>(elements));
  RETURN_IF_ERROR(dequantize_gemm_cpu(f, w_ggml, elements, w.data()));
  GemvCpuParams g = p;
  g.w = w.data();
  gemv_cpu(g);
  return absl::OkStatus();
}

}  // namespace flashserve::kernels
