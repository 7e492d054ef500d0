#pragma once
// Internal to kernels/cpu/quant_matmul*.cc: plain views of the product's operands and the
// few helpers every path shares. Only C types and functions with internal linkage (static),
// so that the SIMD files, built with -mavx2 / -mavx512* flags, never emit an out-of-line
// copy of an inline function that the linker could hand to code running on any CPU.
#include <cstdint>

namespace flashserve::kernels::qmm {

// WeightFormat's values (kernels/quant/quant_layout.h; quant_matmul.cc checks they agree).
enum Format : int32_t { kQ8_0 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ4_K = 4, kQ5_K = 5, kQ6_K = 6 };

struct RowsView {          // Q8Activations (quant_matmul.h) as pointers
  const int8_t* q;         // [m, k]
  const float* dx8;        // [m, k / 32, 8]
  const int32_t* lane_sum;   // [m, k / 32, 8]
  const float* lane_dsum;   // [m, k / 32, 8]
  int m;
  int64_t k;
};

struct MatmulView {        // QuantMatmulParams (quant_matmul.h) as plain values
  int32_t format;
  const uint8_t* w;
  int64_t row_bytes;       // bytes of one weight row
  int64_t k;
  int n_begin, n_end;
  RowsView x;
  float* y;
  int64_t ldy;
  bool accumulate;
};

// Bytes of one block and units (32 elements) per block.
static inline int64_t block_bytes(int32_t f) {
  switch (f) {
    case kQ8_0: return 34;
    case kQ4_0: return 18;
    case kQ4_1: return 20;
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    default: return 210;  // kQ6_K
  }
}
static inline int units_per_block(int32_t f) { return f >= kQ4_K ? 8 : 1; }

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
static inline void k_scale_min(const uint8_t* q, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The integer subtracted from each unsigned quant (Q8_0's SIMD paths add 128 to its int8).
static inline int quant_offset(int32_t f) {
  switch (f) {
    case kQ4_0: return 8;
    case kQ6_K: return 32;
    default: return 0;
  }
}
static inline bool has_min(int32_t f) { return f == kQ4_1 || f == kQ4_K || f == kQ5_K; }

// The canonical final reduction (quant_matmul.h) of v = acc[0] + acc[1].
static inline float reduce8(const float* v) {
  return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

// Rows [r0, r1) of x quantized as quantize_activation_rows_q8 (quant_matmul.h), bit for bit.
struct QuantizeView {
  const float* x;    // [m, k]
  int8_t* q;
  float* dx8;
  int32_t* lane_sum;
  float* lane_dsum;
  int64_t k;
};
void quantize_rows_avx512(const QuantizeView& v, int r0, int r1);

void matmul_avx2(const MatmulView& p);
void matmul_avx512(const MatmulView& p);

}  // namespace flashserve::kernels::qmm
