// The scalar path of the quantized products (the canonical order of quant_matmul.h written
// out), the activation quantization, the run-time choice of instruction set and the
// dispatch to the SIMD files (quant_matmul_avx2.cc, quant_matmul_avx512.cc).
#include "kernels/cpu/quant_matmul.h"

#include <cmath>

#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_matmul_internal.h"
#include "kernels/quant/quant_unit.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace flashserve::kernels {
namespace {

static_assert(static_cast<int>(WeightFormat::kQ8_0) == qmm::kQ8_0 &&
              static_cast<int>(WeightFormat::kQ4_0) == qmm::kQ4_0 &&
              static_cast<int>(WeightFormat::kQ4_1) == qmm::kQ4_1 &&
              static_cast<int>(WeightFormat::kQ4_K) == qmm::kQ4_K &&
              static_cast<int>(WeightFormat::kQ5_K) == qmm::kQ5_K &&
              static_cast<int>(WeightFormat::kQ6_K) == qmm::kQ6_K);

#if defined(__x86_64__)
// XCR0: the register states the OS saves and restores (bit 1 SSE, 2 AVX, 5-7 AVX-512).
uint64_t xcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

bool detect(CpuIsa isa) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28), fma = c & (1u << 12),
             f16c = c & (1u << 29);
  if (!osxsave || !avx || !fma || !f16c || (xcr0() & 0x6) != 0x6) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if ((b & (1u << 5)) == 0) return false;  // AVX2
  if (isa == CpuIsa::kAvx2) return true;
  const bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30),
             vl = b & (1u << 31), vnni = c & (1u << 11);
  return f && dq && bw && vl && vnni && (xcr0() & 0xe6) == 0xe6;
}
#else
bool detect(CpuIsa) { return false; }
#endif

float half(const uint8_t* p) { return quant::half_bits_to_float(p[0] | (p[1] << 8)); }

// One unit of a weight row, decoded: signed integer quants, lane scales, offset.
struct Unit {
  int q[32];
  float dw[8];
  float mw = 0;
};

void decode_legacy(int32_t f, const uint8_t* b, Unit* u) {
  const float d = half(b);
  for (float& s : u->dw) s = d;
  if (f == qmm::kQ8_0) {
    for (int i = 0; i < 32; ++i) u->q[i] = static_cast<int8_t>(b[2 + i]);
    return;
  }
  const uint8_t* qs = b + (f == qmm::kQ4_1 ? 4 : 2);
  const int off = qmm::quant_offset(f);
  for (int i = 0; i < 16; ++i) {
    u->q[i] = (qs[i] & 15) - off;
    u->q[i + 16] = (qs[i] >> 4) - off;
  }
  if (f == qmm::kQ4_1) u->mw = half(b + 2);
}

// Unit j (0..7) of a K-quant super-block.
void decode_kquant(int32_t f, const uint8_t* b, int j, Unit* u) {
  if (f == qmm::kQ6_K) {
    const int n = j / 4, t = j % 4;
    const uint8_t* ql = b + 64 * n + 32 * (t % 2);
    const uint8_t* qh = b + 128 + 32 * n;
    for (int i = 0; i < 32; ++i) {
      u->q[i] = (((ql[i] >> (4 * (t / 2))) & 15) | (((qh[i] >> (2 * t)) & 3) << 4)) - 32;
    }
    const float d = half(b + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int l = 0; l < 8; ++l) u->dw[l] = d * static_cast<float>(sc[2 * j + l / 4]);
    return;
  }
  int sc, mn;
  qmm::k_scale_min(b + 4, j, &sc, &mn);
  const float dw = half(b) * static_cast<float>(sc);
  for (float& s : u->dw) s = dw;
  u->mw = -(half(b + 2) * static_cast<float>(mn));
  const uint8_t* qs = b + (f == qmm::kQ5_K ? 48 : 16) + 32 * (j / 2);
  for (int i = 0; i < 32; ++i) {
    const int hi = f == qmm::kQ5_K ? ((b[16 + i] >> j) & 1) << 4 : 0;
    u->q[i] = ((j % 2 != 0 ? qs[i] >> 4 : qs[i]) & 15) + hi;
  }
}

void matmul_scalar(const qmm::MatmulView& p) {
  const int64_t num_units = p.k / 32;
  const int per_block = qmm::units_per_block(p.format);
  const int64_t bb = qmm::block_bytes(p.format);
  const bool with_min = qmm::has_min(p.format);
  Unit unit;
  for (int j = p.n_begin; j < p.n_end; ++j) {
    const uint8_t* row = p.w + j * p.row_bytes;
    for (int r = 0; r < p.x.m; ++r) {
      const int8_t* xq = p.x.q + r * p.k;
      const float* dx8 = p.x.dx8 + r * num_units * 8;
      const float* sf = p.x.lane_dsum + r * num_units * 8;
      float acc[2][8] = {};
      for (int64_t u = 0; u < num_units; ++u) {
        const uint8_t* block = row + (u / per_block) * bb;
        if (per_block == 1) {
          decode_legacy(p.format, block, &unit);
        } else {
          decode_kquant(p.format, block, static_cast<int>(u % per_block), &unit);
        }
        const float dx = dx8[u * 8];
        float* a = acc[u % 2];
        for (int l = 0; l < 8; ++l) {
          int sum = 0;
          for (int i = 4 * l; i < 4 * l + 4; ++i) sum += unit.q[i] * xq[u * 32 + i];
          a[l] = std::fma(unit.dw[l] * dx, static_cast<float>(sum), a[l]);
          if (with_min) a[l] = std::fma(unit.mw, sf[u * 8 + l], a[l]);
        }
      }
      float v[8];
      for (int l = 0; l < 8; ++l) v[l] = acc[0][l] + acc[1][l];
      float& y = p.y[r * p.ldy + j];
      y = p.accumulate ? y + qmm::reduce8(v) : qmm::reduce8(v);
    }
  }
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar: return "scalar";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

bool cpu_isa_runs(CpuIsa isa) {
  static const bool avx2 = detect(CpuIsa::kAvx2);
  static const bool avx512 = avx2 && detect(CpuIsa::kAvx512);
  switch (isa) {
    case CpuIsa::kScalar: return true;
    case CpuIsa::kAvx2: return avx2;
    case CpuIsa::kAvx512: return avx512;
  }
  return false;
}

CpuIsa best_cpu_isa() {
  if (cpu_isa_runs(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (cpu_isa_runs(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kScalar;
}

void resize_activations_q8(int m, int64_t k, Q8Activations* out) {
  out->m = m;
  out->k = k;
  const size_t lanes = static_cast<size_t>(m) * (k / 32) * 8;
  if (out->q.size() < static_cast<size_t>(m) * k) out->q.resize(static_cast<size_t>(m) * k);
  if (out->dx8.size() < lanes) {
    out->dx8.resize(lanes);
    out->lane_sum.resize(lanes);
    out->lane_dsum.resize(lanes);
  }
}

void quantize_activation_rows_q8(CpuIsa isa, const float* x, int r0, int r1,
                                 Q8Activations* out) {
  const int64_t k = out->k, num_units = k / 32;
#if defined(__x86_64__)
  if (isa == CpuIsa::kAvx512) {
    return qmm::quantize_rows_avx512({x, out->q.data(), out->dx8.data(), out->lane_sum.data(),
                                      out->lane_dsum.data(), k},
                                     r0, r1);
  }
#endif
  float d[64];  // unit scales of up to 2048 elements at a time
  for (int r = r0; r < r1; ++r) {
    int8_t* q = out->q.data() + r * k;
    for (int64_t u0 = 0; u0 < num_units; u0 += 64) {
      const int64_t nu = num_units - u0 < 64 ? num_units - u0 : 64;
      quantize_q8_cpu(x + r * k + u0 * 32, nu * 32, q + u0 * 32, d);
      for (int64_t u = u0; u < u0 + nu; ++u) {
        for (int l = 0; l < 8; ++l) {
          const int64_t i = (r * num_units + u) * 8 + l;
          const int8_t* quad = q + u * 32 + 4 * l;
          out->dx8[i] = d[u - u0];
          out->lane_sum[i] = quad[0] + quad[1] + quad[2] + quad[3];
          out->lane_dsum[i] = d[u - u0] * static_cast<float>(out->lane_sum[i]);
        }
      }
    }
  }
}

void quantize_activations_q8(const float* x, int m, int64_t k, Q8Activations* out) {
  resize_activations_q8(m, k, out);
  quantize_activation_rows_q8(CpuIsa::kScalar, x, 0, m, out);
}

int64_t quant_row_bytes(WeightFormat format, int64_t k) {
  return k / weight_block_elements(format) * weight_block_bytes(format);
}

void quant_matmul_cpu(CpuIsa isa, const QuantMatmulParams& p) {
  const Q8Activations& x = *p.x;
  qmm::MatmulView v{static_cast<int32_t>(p.format),
                    p.w,
                    quant_row_bytes(p.format, p.k),
                    p.k,
                    p.n_begin,
                    p.n_end,
                    {x.q.data(), x.dx8.data(), x.lane_sum.data(), x.lane_dsum.data(), x.m, x.k},
                    p.y,
                    p.ldy,
                    p.accumulate};
#if defined(__x86_64__)
  if (isa == CpuIsa::kAvx512) return qmm::matmul_avx512(v);
  if (isa == CpuIsa::kAvx2) return qmm::matmul_avx2(v);
#endif
  matmul_scalar(v);
}

}  // namespace flashserve::kernels
