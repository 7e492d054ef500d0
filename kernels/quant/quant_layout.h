#pragma once
// Quantized weights on the device: ggml's block types (as a GGUF file stores them) and the
// layout kernels/quant/ reads them in, made once at load by quant_repack().
//
// ggml's blocks (ggml-org/llama.cpp:ggml/src/ggml-common.h; QK = elements per block):
//   Q8_0 (32, 34 B):  fp16 d | int8 qs[32]                 x = d * q
//   Q4_0 (32, 18 B):  fp16 d | qs[16]  (j: low nibble of qs[j], j + 16: high nibble)
//                                                           x = d * (q - 8)
//   Q4_1 (32, 20 B):  fp16 d, m | qs[16] (as Q4_0)          x = d * q + m
//   Q4_K (256, 144 B): fp16 d, dmin | scales[12] | qs[128]: eight sub-blocks of 32, each
//                     with a 6-bit scale sc and min mn packed in `scales`; element
//                     64 g + l (l < 32) is the low nibble of qs[32 g + l], 64 g + 32 + l its
//                     high nibble;                          x = (d sc) q - (dmin mn)
//   Q5_K (256, 176 B): fp16 d, dmin | scales[12] | qh[32] | qs[128]: Q4_K plus a fifth bit,
//                     element e of sub-block s (e = 32 s + l) has bit s of qh[l]
//   Q6_K (256, 210 B): ql[128] | qh[64] | int8 scales[16] | fp16 d; element 128 n + 32 t + l
//                     (t < 4) has low bits (ql[64 n + 32 (t % 2) + l] >> 4 (t / 2)) & 15 and
//                     high bits (qh[32 n + l] >> 2 t) & 3; x = (d scales[e / 16]) (q - 32)
//
// The device layout ("repacked"): every row of k elements is cut into units of 32
// consecutive elements (a Q4_0/Q4_1/Q8_0 block, a K-quant sub-block), and each kind of
// field lies in its own array so that a warp reads any of them with coalesced loads, lane
// i taking unit i:
//   qs    [num_rows][k / 32][16 B]: byte i = element i (low nibble) | element 16 + i (high
//         nibble), the low 4 bits of each element's unsigned quant. Q8_0 instead:
//         [num_rows][2][k / 32][16 B], the int8 of elements 0-15 of every unit, then those of
//         elements 16-31 (two coalesced 16-byte loads per unit, not two strided ones).
//   qh    Q5_K: [num_rows][k / 32] uint32: byte j, bit i = bit 4 of element 4 i + j.
//         Q6_K: [num_rows][k / 32][2] uint32: word h, byte j, bits 2 i..2 i + 1 = bits 4-5 of
//         element 16 h + 4 i + j. (So `(word >> s) & mask` puts the high bits of four
//         elements at bit 4 of four bytes, the lanes of a dp4a.)
//   scale Q8_0, Q4_0: fp16 d [num_rows][k / 32]; Q4_1: {fp16 d, fp16 m} [num_rows][k / 32];
//         Q4_K, Q5_K: the 16-byte head of each ggml block {d, dmin, scales[12]}
//         [num_rows][k / 256]; Q6_K: int8 [num_rows][k / 16] (ggml's scales).
//   d     Q6_K only: fp16 d [num_rows][k / 256].
// The arrays follow each other in one allocation, each starting on a 256-byte boundary.
// Bytes per element are the file's (plus at most 4 x 255 bytes of padding per tensor).
// bf16 weights keep the plain [num_rows][k] layout (qs only, 2 k bytes a row).
//
// Plain C++: included by host code and (through the .cuh files) device code.
#include <cstdint>

#include "absl/status/status.h"

#if defined(__CUDACC__)
#define FS_QUANT_HD __host__ __device__ __forceinline__
#else
#define FS_QUANT_HD inline
#endif

namespace flashserve::kernels {

enum class WeightFormat : int32_t { kBf16 = 0, kQ8_0, kQ4_0, kQ4_1, kQ4_K, kQ5_K, kQ6_K };

inline constexpr int kQuantUnit = 32;       // elements per unit (see above)
inline constexpr int kQuantSuperBlock = 256;  // elements per K-quant block

// ggml's blocks, byte for byte (fp16 fields as their bits).
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// Elements per ggml block (1 for bf16) and bytes per block.
FS_QUANT_HD int64_t weight_block_elements(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBf16: return 1;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K:
    case WeightFormat::kQ6_K: return kQuantSuperBlock;
    default: return kQuantUnit;
  }
}
FS_QUANT_HD int64_t weight_block_bytes(WeightFormat f) {
  switch (f) {
    case WeightFormat::kBf16: return 2;
    case WeightFormat::kQ8_0: return 34;
    case WeightFormat::kQ4_0: return 18;
    case WeightFormat::kQ4_1: return 20;
    case WeightFormat::kQ4_K: return 144;
    case WeightFormat::kQ5_K: return 176;
    case WeightFormat::kQ6_K: return 210;
  }
  return 0;
}

// Where each array of the repacked layout starts, and its bytes per row.
struct QuantLayout {
  int64_t qs_row_bytes = 0, qh_row_bytes = 0, scale_row_bytes = 0, d_row_bytes = 0;
  int64_t qs_offset = 0, qh_offset = 0, scale_offset = 0, d_offset = 0;
  int64_t total_bytes = 0;
};

FS_QUANT_HD int64_t quant_align256(int64_t x) { return (x + 255) / 256 * 256; }

// The layout of a [num_rows, k] weight; k must be a whole number of blocks
// (quant_layout_ok).
FS_QUANT_HD QuantLayout quant_layout(WeightFormat f, int64_t num_rows, int64_t k) {
  QuantLayout l;
  const int64_t units = k / kQuantUnit, supers = k / kQuantSuperBlock;
  switch (f) {
    case WeightFormat::kBf16: l.qs_row_bytes = 2 * k; break;
    case WeightFormat::kQ8_0: l.qs_row_bytes = k; l.scale_row_bytes = 2 * units; break;
    case WeightFormat::kQ4_0: l.qs_row_bytes = k / 2; l.scale_row_bytes = 2 * units; break;
    case WeightFormat::kQ4_1: l.qs_row_bytes = k / 2; l.scale_row_bytes = 4 * units; break;
    case WeightFormat::kQ4_K: l.qs_row_bytes = k / 2; l.scale_row_bytes = 16 * supers; break;
    case WeightFormat::kQ5_K:
      l.qs_row_bytes = k / 2;
      l.qh_row_bytes = 4 * units;
      l.scale_row_bytes = 16 * supers;
      break;
    case WeightFormat::kQ6_K:
      l.qs_row_bytes = k / 2;
      l.qh_row_bytes = 8 * units;
      l.scale_row_bytes = 2 * units;
      l.d_row_bytes = 2 * supers;
      break;
  }
  l.qs_offset = 0;
  l.qh_offset = quant_align256(l.qs_offset + num_rows * l.qs_row_bytes);
  l.scale_offset = quant_align256(l.qh_offset + num_rows * l.qh_row_bytes);
  l.d_offset = quant_align256(l.scale_offset + num_rows * l.scale_row_bytes);
  l.total_bytes = quant_align256(l.d_offset + num_rows * l.d_row_bytes);
  return l;
}

// Whether rows of k elements are whole blocks of `f` (and whole 16-byte chunks for bf16).
FS_QUANT_HD bool quant_layout_ok(WeightFormat f, int64_t k) {
  if (k <= 0) return false;
  return f == WeightFormat::kBf16 ? k % 8 == 0 : k % weight_block_elements(f) == 0;
}

// "bf16", "Q8_0", ...
const char* weight_format_name(WeightFormat f);

// Bytes of one row of k elements in ggml's encoding (k a whole number of blocks).
inline int64_t ggml_row_bytes(WeightFormat f, int64_t k) {
  return k / weight_block_elements(f) * weight_block_bytes(f);
}

// Repacks a [num_rows, k] tensor from ggml's blocks (`src`, ggml_row_bytes(f, k) * num_rows
// bytes, rows one after another as in a GGUF file) into the device layout above (`dst`,
// quant_layout(f, num_rows, k).total_bytes bytes; padding is zeroed). Host memory, once at
// load; the copy to the device is the caller's. InvalidArgument naming the value when k is
// not a whole number of blocks, num_rows < 1 or a size does not match; Unimplemented for
// bf16 (nothing to repack).
absl::Status quant_repack(WeightFormat f, const uint8_t* src, int64_t src_bytes,
                          int64_t num_rows, int64_t k, uint8_t* dst, int64_t dst_bytes);

}  // namespace flashserve::kernels
