#pragma once
// ggml tensor element types (the numbering of `enum ggml_type` in
// ggml-org/llama.cpp:ggml/include/ggml.h, which GGUF stores)
// and their block geometry: a tensor of a block type is a sequence of blocks, each encoding
// `block_size` consecutive elements of a row in `block_bytes` bytes.
#include <cstdint>
#include <string>

namespace flashserve::model {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  // 4 and 5 (Q4_2, Q4_3) were removed from ggml.
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  // 31..33 (Q4_0_4_4, Q4_0_4_8, Q4_0_8_8) were removed from ggml.
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  // 36..38 (IQ4_NL_4_4, ...) were removed from ggml.
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
};

// Block geometry of a type GGUF files may hold. Unknown / removed type ids have
// block_size == 0 (a reader must reject them).
struct GgmlTypeTraits {
  const char* name;     // ggml's name, e.g. "q4_1"; "unknown" for unknown ids
  int64_t block_size;   // elements per block (1 for plain types); 0 if unknown
  int64_t block_bytes;  // bytes per block; 0 if unknown
};

GgmlTypeTraits ggml_type_traits(GgmlType type);

// "q4_1", or "unknown(<id>)" for ids this build does not know.
std::string ggml_type_name(GgmlType type);

// True for the types `dequantize_row` (model/gguf/dequant.h) supports: F32, F16, BF16,
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (blocks of 32) and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// IQ4_XS (super-blocks of 256): every type llama.cpp's Q2_K ... Q8_0 and IQ4 presets write.
bool ggml_type_can_dequantize(GgmlType type);

// Their names, comma-separated, for error messages: "f32, f16, bf16, q8_0, ...".
std::string dequantizable_type_names();

}  // namespace flashserve::model
