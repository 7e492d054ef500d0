#pragma once
// Internal to model/gguf: byte layouts of ggml's block types shared by the decoders
// (dequant.cc, dequant_kquants.cc) and the encoders (quantize.cc, quantize_kquants.cc).
// Layouts follow ggml-org/llama.cpp:ggml/src/ggml-common.h's block_* structs; multi-byte fields are little-endian and,
// in a file, unaligned (blocks of 18 / 22 / 110 ... bytes follow each other).
#include <cstdint>

namespace flashserve::model::blocks {

inline constexpr int kQK = 256;  // elements per K-quant / IQ4_XS super-block (ggml's QK_K)
inline constexpr int kQ32 = 32;  // elements per Q4_0 ... Q8_0 / IQ4_NL block

inline constexpr int kQ4_0Bytes = 18;    // fp16 d | 16 B nibbles
inline constexpr int kQ4_1Bytes = 20;    // fp16 d | fp16 m | 16 B nibbles
inline constexpr int kQ5_0Bytes = 22;    // fp16 d | u32 qh | 16 B nibbles
inline constexpr int kQ5_1Bytes = 24;    // fp16 d | fp16 m | u32 qh | 16 B nibbles
inline constexpr int kQ8_0Bytes = 34;    // fp16 d | 32 x int8
inline constexpr int kIQ4_NLBytes = 18;  // fp16 d | 16 B nibbles (indices into kIq4Values)
inline constexpr int kQ2_KBytes = 84;    // 16 B scales | 64 B qs | fp16 d | fp16 dmin
inline constexpr int kQ3_KBytes = 110;   // 32 B hmask | 64 B qs | 12 B scales | fp16 d
inline constexpr int kQ4_KBytes = 144;   // fp16 d | fp16 dmin | 12 B scales | 128 B qs
inline constexpr int kQ5_KBytes = 176;   // fp16 d | fp16 dmin | 12 B scales | 32 B qh | 128 B qs
inline constexpr int kQ6_KBytes = 210;   // 128 B ql | 64 B qh | 16 x int8 scales | fp16 d
inline constexpr int kIQ4_XSBytes = 136; // fp16 d | u16 scales_h | 4 B scales_l | 128 B qs

// The 16 levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl), ascending.
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

inline uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
inline void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Q4_K / Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes: for j < 4,
// bytes j and j + 4 hold scale j and min j in their low 6 bits; scales / mins 4..7 keep
// their low 4 bits in byte j + 4 (scale: low nibble, min: high nibble) and their top 2
// bits in the top 2 bits of bytes j - 4 (scale) and j (min).
inline void unpack_k_scale_min(const uint8_t* packed, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Q3_K packs sixteen 6-bit scales (stored + 32) into 12 bytes: scale s has its low 4 bits
// in byte s (s < 8: low nibble) or byte s - 8 (high nibble), its top 2 bits in byte
// 8 + s % 4 at bit 2 * (s / 4).
inline int unpack_q3_k_scale(const uint8_t* packed, int s) {
  const int low = s < 8 ? (packed[s] & 0x0F) : (packed[s - 8] >> 4);
  const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace flashserve::model::blocks
