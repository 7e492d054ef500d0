#include "model/gguf/ggml_type.h"

#include "absl/strings/str_cat.h"

namespace flashserve::model {
namespace {

// Block geometry from ggml-org/llama.cpp:ggml/src/ggml-common.h (block_* structs) and
// ggml/src/ggml.c's type_traits there; cross-checked with gguf-py 0.19.0's GGML_QUANT_SIZES.
constexpr GgmlTypeTraits kUnknown = {"unknown", 0, 0};

// The types model/gguf/dequant.h decodes, in the order error messages list them.
constexpr GgmlType kDequantizable[] = {
    GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16,   GgmlType::kQ8_0, GgmlType::kQ4_0,
    GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,   GgmlType::kQ2_K, GgmlType::kQ3_K,
    GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,   GgmlType::kIQ4_NL, GgmlType::kIQ4_XS,
};

GgmlTypeTraits traits_of(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return {"f32", 1, 4};
    case GgmlType::kF16: return {"f16", 1, 2};
    case GgmlType::kQ4_0: return {"q4_0", 32, 18};
    case GgmlType::kQ4_1: return {"q4_1", 32, 20};
    case GgmlType::kQ5_0: return {"q5_0", 32, 22};
    case GgmlType::kQ5_1: return {"q5_1", 32, 24};
    case GgmlType::kQ8_0: return {"q8_0", 32, 34};
    // ggml's block_q8_1 is fp16 d + fp16 s + 32 int8 = 36 bytes (gguf-py 0.19 says 40: it
    // predates the fp16 fields; q8_1 is a matmul intermediate that files do not hold).
    case GgmlType::kQ8_1: return {"q8_1", 32, 36};
    case GgmlType::kQ2_K: return {"q2_K", 256, 84};
    case GgmlType::kQ3_K: return {"q3_K", 256, 110};
    case GgmlType::kQ4_K: return {"q4_K", 256, 144};
    case GgmlType::kQ5_K: return {"q5_K", 256, 176};
    case GgmlType::kQ6_K: return {"q6_K", 256, 210};
    case GgmlType::kQ8_K: return {"q8_K", 256, 292};
    case GgmlType::kIQ2_XXS: return {"iq2_xxs", 256, 66};
    case GgmlType::kIQ2_XS: return {"iq2_xs", 256, 74};
    case GgmlType::kIQ3_XXS: return {"iq3_xxs", 256, 98};
    case GgmlType::kIQ1_S: return {"iq1_s", 256, 50};
    case GgmlType::kIQ4_NL: return {"iq4_nl", 32, 18};
    case GgmlType::kIQ3_S: return {"iq3_s", 256, 110};
    case GgmlType::kIQ2_S: return {"iq2_s", 256, 82};
    case GgmlType::kIQ4_XS: return {"iq4_xs", 256, 136};
    case GgmlType::kI8: return {"i8", 1, 1};
    case GgmlType::kI16: return {"i16", 1, 2};
    case GgmlType::kI32: return {"i32", 1, 4};
    case GgmlType::kI64: return {"i64", 1, 8};
    case GgmlType::kF64: return {"f64", 1, 8};
    case GgmlType::kIQ1_M: return {"iq1_m", 256, 56};
    case GgmlType::kBF16: return {"bf16", 1, 2};
    case GgmlType::kTQ1_0: return {"tq1_0", 256, 54};
    case GgmlType::kTQ2_0: return {"tq2_0", 256, 66};
    case GgmlType::kMXFP4: return {"mxfp4", 32, 17};
    case GgmlType::kNVFP4: return {"nvfp4", 64, 36};
    case GgmlType::kQ1_0: return {"q1_0", 128, 18};
  }
  return kUnknown;
}

}  // namespace

GgmlTypeTraits ggml_type_traits(GgmlType type) { return traits_of(type); }

std::string ggml_type_name(GgmlType type) {
  GgmlTypeTraits traits = traits_of(type);
  if (traits.block_size == 0) {
    return absl::StrCat("unknown(", static_cast<uint32_t>(type), ")");
  }
  return traits.name;
}

bool ggml_type_can_dequantize(GgmlType type) {
  for (GgmlType t : kDequantizable) {
    if (t == type) return true;
  }
  return false;
}

std::string dequantizable_type_names() {
  std::string names;
  for (GgmlType t : kDequantizable) absl::StrAppend(&names, names.empty() ? "" : ", ", ggml_type_name(t));
  return names;
}

}  // namespace flashserve::model
