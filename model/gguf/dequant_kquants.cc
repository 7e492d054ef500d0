// Decoders of the 256-element super-block types: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS
// (see model/gguf/dequant.h for the formulas, quant_blocks.h for the byte layouts).
// Element order inside a super-block, as ggml's dequantize_row_* writes it:
//   Q2_K, Q3_K low bits, Q6_K high bits: element 128 h + 32 k + l (h < 2, k < 4, l < 32)
//     comes from byte 32 h + l of the 2-bit array, bits 2k..2k+1;
//   Q3_K high bit, Q5_K fifth bit: element 32 i + l is bit i of mask byte l;
//   Q4_K, Q5_K nibbles: element 64 j + 32 t + l is nibble t of byte 32 j + l;
//   Q6_K low nibbles: element 128 h + 64 t + i is nibble t of byte 64 h + i;
//   IQ4_XS: element 32 s + 16 t + j is nibble t of byte 16 s + j.
#include <cstdint>

#include "model/gguf/dequant.h"
#include "model/gguf/quant_blocks.h"

namespace flashserve::model {
namespace {

using blocks::kQK;
using blocks::load_u16;

}  // namespace

// Q2_K, Q3_K and Q6_K walk their super-block as h (two halves of 128), k (four runs of 32
// sharing a byte array position and shift), then two sub-blocks of 16 with one scale each:
// element 128 h + 32 k + 16 half + j, in output order.
void dequantize_q2_k(const uint8_t* src, int64_t num_elements, float* dst) {
  for (int64_t b = 0; b < num_elements / kQK; ++b) {
    const uint8_t* block = src + b * blocks::kQ2_KBytes;
    const uint8_t* scales = block;
    const float d = fp16_to_fp32(load_u16(block + 80));
    const float dmin = fp16_to_fp32(load_u16(block + 82));
    float* out = dst + b * kQK;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qs = block + 16 + 32 * h;
      for (int k = 0; k < 4; ++k) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = scales[8 * h + 2 * k + half];
          const float dl = d * static_cast<float>(sc & 0x0F);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int j = 0; j < 16; ++j) {
            const int q = (qs[16 * half + j] >> (2 * k)) & 3;
            *out++ = dl * static_cast<float>(q) - ml;
          }
        }
      }
    }
  }
}

void dequantize_q3_k(const uint8_t* src, int64_t num_elements, float* dst) {
  for (int64_t b = 0; b < num_elements / kQK; ++b) {
    const uint8_t* block = src + b * blocks::kQ3_KBytes;
    const uint8_t* hmask = block;
    const uint8_t* scales = block + 96;
    const float d = fp16_to_fp32(load_u16(block + 108));
    float* out = dst + b * kQK;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qs = block + 32 + 32 * h;
      for (int k = 0; k < 4; ++k) {
        const int mask_bit = 4 * h + k;  // element 32 i + l is bit i of hmask[l]
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(blocks::unpack_q3_k_scale(scales, 8 * h + 2 * k + half));
          for (int j = 0; j < 16; ++j) {
            const int l = 16 * half + j;
            const int low = (qs[l] >> (2 * k)) & 3;
            const int high = (hmask[l] >> mask_bit) & 1;  // set: +0, clear: -4
            *out++ = dl * static_cast<float>(low - (high != 0 ? 0 : 4));
          }
        }
      }
    }
  }
}

void dequantize_q4_k(const uint8_t* src, int64_t num_elements, float* dst) {
  for (int64_t b = 0; b < num_elements / kQK; ++b) {
    const uint8_t* block = src + b * blocks::kQ4_KBytes;
    const float d = fp16_to_fp32(load_u16(block));
    const float dmin = fp16_to_fp32(load_u16(block + 2));
    const uint8_t* scales = block + 4;
    const uint8_t* qs = block + 16;
    float* out = dst + b * kQK;
    for (int s = 0; s < 8; ++s) {
      int sc = 0, m = 0;
      blocks::unpack_k_scale_min(scales, s, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      for (int l = 0; l < 32; ++l) {
        out[32 * s + l] = d1 * static_cast<float>((q[l] >> shift) & 0x0F) - m1;
      }
    }
  }
}

void dequantize_q5_k(const uint8_t* src, int64_t num_elements, float* dst) {
  for (int64_t b = 0; b < num_elements / kQK; ++b) {
    const uint8_t* block = src + b * blocks::kQ5_KBytes;
    const float d = fp16_to_fp32(load_u16(block));
    const float dmin = fp16_to_fp32(load_u16(block + 2));
    const uint8_t* scales = block + 4;
    const uint8_t* qh = block + 16;
    const uint8_t* qs = block + 48;
    float* out = dst + b * kQK;
    for (int s = 0; s < 8; ++s) {
      int sc = 0, m = 0;
      blocks::unpack_k_scale_min(scales, s, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      for (int l = 0; l < 32; ++l) {
        const int value = ((q[l] >> shift) & 0x0F) | (((qh[l] >> s) & 1) << 4);
        out[32 * s + l] = d1 * static_cast<float>(value) - m1;
      }
    }
  }
}

void dequantize_q6_k(const uint8_t* src, int64_t num_elements, float* dst) {
  for (int64_t b = 0; b < num_elements / kQK; ++b) {
    const uint8_t* block = src + b * blocks::kQ6_KBytes;
    const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
    const float d = fp16_to_fp32(load_u16(block + 208));
    float* out = dst + b * kQK;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qh = block + 128 + 32 * h;
      for (int k = 0; k < 4; ++k) {
        const uint8_t* ql = block + 64 * h + 32 * (k % 2);
        const int low_shift = 4 * (k / 2);
        for (int half = 0; half < 2; ++half) {
          const float dl = d * static_cast<float>(scales[8 * h + 2 * k + half]);
          for (int j = 0; j < 16; ++j) {
            const int l = 16 * half + j;
            const int low = (ql[l] >> low_shift) & 0x0F;
            const int high = (qh[l] >> (2 * k)) & 3;
            *out++ = dl * static_cast<float>((low | (high << 4)) - 32);
          }
        }
      }
    }
  }
}

void dequantize_iq4_xs(const uint8_t* src, int64_t num_elements, float* dst) {
  for (int64_t b = 0; b < num_elements / kQK; ++b) {
    const uint8_t* block = src + b * blocks::kIQ4_XSBytes;
    const float d = fp16_to_fp32(load_u16(block));
    const uint16_t scales_h = load_u16(block + 2);
    const uint8_t* scales_l = block + 4;
    const uint8_t* qs = block + 8;
    float* out = dst + b * kQK;
    for (int s = 0; s < 8; ++s) {
      const int low = (scales_l[s / 2] >> (4 * (s % 2))) & 0x0F;
      const int high = (scales_h >> (2 * s)) & 3;
      const float dl = d * static_cast<float>((low | (high << 4)) - 32);
      for (int j = 0; j < 16; ++j) {
        const uint8_t byte = qs[16 * s + j];
        out[32 * s + j] = dl * static_cast<float>(blocks::kIq4Values[byte & 0x0F]);
        out[32 * s + 16 + j] = dl * static_cast<float>(blocks::kIq4Values[byte >> 4]);
      }
    }
  }
}

}  // namespace flashserve::model
