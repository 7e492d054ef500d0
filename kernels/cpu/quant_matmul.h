#pragma once
// Quantized matrix products of the CPU backend: y[m, n] (+)= x[m, k] W[n, k]^T with W in
// ggml's block formats as a GGUF file stores them (kernels/quant/quant_layout.h: Q8_0, Q4_0,
// Q4_1, Q4_K, Q5_K, Q6_K) and x quantized per unit of 32 elements by quantize_q8_cpu
// (kernels/cpu/quant.h, the GPU's activation quantization): dot products of integers.
//
// One canonical order of operations, which the scalar path spells out and every SIMD path
// (AVX2, AVX-512 VNNI) reproduces bit for bit, so results are the same on every CPU and a
// row's result never depends on the other rows of the product (batch invariance by
// construction). For output (r, j), over the units u of the row (32 elements each):
//   q_u[i]   the format's signed integer quant of element i (Q4_0: nibble - 8, Q6_K: q - 32,
//            Q4_1 / Q4_K / Q5_K: the unsigned quant);  xq_u[i] the activation's int8;
//   p_u[l]   = sum_{i in 4l..4l+3} q_u[i] xq_u[i]  for the 8 lanes l (exact int32);
//   s_u[l]   = sum_{i in 4l..4l+3} xq_u[i];
//   dw_u[l]  the weight scale: d (Q8_0, Q4_0, Q4_1), d * sc (Q4_K, Q5_K: the sub-block's
//            6-bit scale), d * sc[2u + l / 4] (Q6_K: one int8 scale per 16 elements);
//   mw_u     the weight offset: m (Q4_1), -(dmin * mn) (Q4_K, Q5_K), none otherwise;
//   acc[u % 2][l] = fma(dw_u[l] * dx_u, float(p_u[l]), acc[u % 2][l]), then, with an
//                   offset, acc[u % 2][l] = fma(mw_u, dx_u * float(s_u[l]), acc[u % 2][l])
//                   (dx_u * float(s_u[l]) is computed once per activation: lane_dsum);
//   v = acc[0] + acc[1];  dot = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7));
//   y = dot, or y + dot when accumulating.
// Every float operation is single-precision, round to nearest, fma fused, nothing else
// contracted (these files build with -ffp-contract=off). The value is sum(w^ x^) of the
// dequantized weights and activations up to fp32 rounding: quant_gemv_cpu (quant.h) is the
// fp32 reference the tests compare with.
#include <cstdint>
#include <vector>

#include "kernels/quant/quant_layout.h"

namespace flashserve::kernels {

// The instruction sets of the quantized products, chosen at run time.
//   kAvx512: AVX-512 F, BW, VL, DQ and VNNI (vpdpbusd), with the OS saving ZMM state;
//   kAvx2:   AVX2, FMA and F16C, with the OS saving YMM state.
enum class CpuIsa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };

const char* cpu_isa_name(CpuIsa isa);  // "scalar", "avx2", "avx512"

// Whether this CPU and OS run `isa`: CPUID feature bits and the XCR0 state bits that the
// OS enabled (XGETBV), never the compiler's target. kScalar always does.
bool cpu_isa_runs(CpuIsa isa);
// The widest instruction set that runs here (checked once, then cached).
CpuIsa best_cpu_isa();

// Activations quantized for the products, m rows of k elements (k a multiple of 32):
// q, d as quantize_q8_cpu; dx8 each unit's d repeated over its 8 lanes; lane_sum the lanes'
// s_u[l] (int32) and lane_dsum = dx_u * float(s_u[l]). Buffers grow and are reused.
struct Q8Activations {
  int m = 0;
  int64_t k = 0;
  std::vector<int8_t> q;           // [m, k]
  std::vector<float> dx8;          // [m, k / 32, 8]
  std::vector<int32_t> lane_sum;   // [m, k / 32, 8]
  std::vector<float> lane_dsum;    // [m, k / 32, 8]
};

// Sizes `out` for m rows of k elements. REQUIRES k % 32 == 0.
void resize_activations_q8(int m, int64_t k, Q8Activations* out);
// Quantizes rows [r0, r1) of x ([m, k] floats, row stride k) into a sized `out`; ranges
// may run on different threads. Every isa gives the same bits (kAvx512 has its own code,
// the others the scalar one). REQUIRES cpu_isa_runs(isa).
void quantize_activation_rows_q8(CpuIsa isa, const float* x, int r0, int r1,
                                 Q8Activations* out);
// resize_activations_q8, then every row (scalar).
void quantize_activations_q8(const float* x, int m, int64_t k, Q8Activations* out);

// Rows [n_begin, n_end) of the product, for all m activation rows.
struct QuantMatmulParams {
  WeightFormat format = WeightFormat::kQ8_0;  // not kBf16
  const uint8_t* w = nullptr;  // [n, k] ggml blocks, row j at j * quant_row_bytes(format, k)
  int64_t k = 0;               // a whole number of the format's blocks
  int n_begin = 0, n_end = 0;
  const Q8Activations* x = nullptr;
  float* y = nullptr;          // [m, ldy]; output (r, j) at y[r * ldy + j]
  int64_t ldy = 0;
  bool accumulate = false;     // y += dot instead of y = dot
};

int64_t quant_row_bytes(WeightFormat format, int64_t k);

// Runs the product with `isa`. REQUIRES cpu_isa_runs(isa) and the REQUIREs above.
void quant_matmul_cpu(CpuIsa isa, const QuantMatmulParams& p);

}  // namespace flashserve::kernels
