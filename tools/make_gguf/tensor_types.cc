// Per-tensor types of flashserve-make-gguf (see tools/make_gguf/tensor_types.h).
#include "tools/make_gguf/tensor_types.h"

#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace flashserve::tools {
namespace {

using model::GgmlType;

struct MixInfo {
  QuantMix mix;
  const char* name;
  GgmlType default_type;
  uint32_t llama_ftype;  // LLAMA_FTYPE_MOSTLY_*
};

constexpr MixInfo kMixes[] = {
    {QuantMix::kQ4_K_M, "q4_k_m", GgmlType::kQ4_K, 15},
    {QuantMix::kQ5_K_M, "q5_k_m", GgmlType::kQ5_K, 17},
    {QuantMix::kQ6_K, "q6_k", GgmlType::kQ6_K, 18},
    {QuantMix::kQ8_0, "q8_0", GgmlType::kQ8_0, 7},
};

const MixInfo* find_mix(QuantMix mix) {
  for (const MixInfo& m : kMixes) {
    if (m.mix == mix) return &m;
  }
  return nullptr;
}

// llama.cpp's use_more_bits: layers whose attn_v / ffn_down get more bits in *_K_M.
bool use_more_bits(int layer, int num_layers) {
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

// The layer of "blk.<i>.<...>", or -1.
int layer_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) return -1;
  return layer;
}

bool fits(GgmlType type, int64_t row_length) {
  const int64_t block = model::ggml_type_traits(type).block_size;
  return block > 0 && row_length % block == 0;
}

// The mixture's type before the row fallback.
GgmlType mixed_type(const MixInfo& m, const std::string& name, int64_t row_length, int num_layers, bool tied) {
  GgmlType type = m.default_type;
  if (name == "output.weight" || (tied && name == "token_embd.weight")) {
    if (!fits(type, row_length)) return GgmlType::kQ8_0;
    return type == GgmlType::kQ8_0 ? type : GgmlType::kQ6_K;
  }
  const bool k_m = m.mix == QuantMix::kQ4_K_M || m.mix == QuantMix::kQ5_K_M;
  const int layer = layer_of(name);
  const bool sensitive = absl::StrContains(name, "attn_v.weight") || absl::StrContains(name, "ffn_down");
  if (k_m && sensitive && layer >= 0 && use_more_bits(layer, num_layers)) type = GgmlType::kQ6_K;
  return type;
}

}  // namespace

std::vector<std::string> quant_mix_names() {
  std::vector<std::string> names;
  for (const MixInfo& m : kMixes) names.push_back(m.name);
  return names;
}

absl::StatusOr<QuantMix> parse_quant_mix(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  for (const MixInfo& m : kMixes) {
    if (lower == m.name) return m.mix;
  }
  return absl::InvalidArgumentError(absl::StrCat("bad value '", std::string(name), "' for --ftype: expected ",
                                                 absl::StrJoin(quant_mix_names(), ", ")));
}

std::string quant_mix_name(QuantMix mix) {
  const MixInfo* m = find_mix(mix);
  return m != nullptr ? m->name : "pure";
}

GgmlType quant_mix_default_type(QuantMix mix) {
  const MixInfo* m = find_mix(mix);
  return m != nullptr ? m->default_type : GgmlType::kF32;
}

uint32_t llama_file_type(QuantMix mix, GgmlType pure_type) {
  if (const MixInfo* m = find_mix(mix)) return m->llama_ftype;
  switch (pure_type) {
    case GgmlType::kF32: return 0;
    case GgmlType::kF16: return 1;
    case GgmlType::kQ4_0: return 2;
    case GgmlType::kQ4_1: return 3;
    case GgmlType::kQ8_0: return 7;
    case GgmlType::kQ5_0: return 8;
    case GgmlType::kQ5_1: return 9;
    case GgmlType::kQ2_K: return 10;
    case GgmlType::kQ3_K: return 11;  // Q3_K_S
    case GgmlType::kQ4_K: return 14;  // Q4_K_S
    case GgmlType::kQ5_K: return 16;  // Q5_K_S
    case GgmlType::kQ6_K: return 18;
    case GgmlType::kIQ4_NL: return 25;
    case GgmlType::kIQ4_XS: return 30;
    case GgmlType::kBF16: return 32;
    default: return 0;
  }
}

absl::StatusOr<GgmlType> fallback_for_row(GgmlType type, int64_t row_length) {
  if (fits(type, row_length)) return type;
  GgmlType fallback;
  switch (type) {
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K: fallback = GgmlType::kQ4_0; break;
    case GgmlType::kQ4_K: fallback = GgmlType::kQ5_0; break;
    case GgmlType::kQ5_K: fallback = GgmlType::kQ5_1; break;
    case GgmlType::kQ6_K: fallback = GgmlType::kQ8_0; break;
    case GgmlType::kIQ4_XS: fallback = GgmlType::kIQ4_NL; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(model::ggml_type_name(type), " stores rows in blocks of ",
                                                     model::ggml_type_traits(type).block_size, " values: a row of ",
                                                     row_length, " is not a multiple of ",
                                                     model::ggml_type_traits(type).block_size));
  }
  return fits(fallback, row_length) ? fallback : GgmlType::kF16;
}

absl::StatusOr<GgmlType> weight_tensor_type(QuantMix mix, GgmlType pure_type, const std::string& name,
                                            int64_t row_length, int num_layers, bool tied_embeddings) {
  const MixInfo* m = find_mix(mix);
  const GgmlType type = m == nullptr ? pure_type : mixed_type(*m, name, row_length, num_layers, tied_embeddings);
  absl::StatusOr<GgmlType> fitted = fallback_for_row(type, row_length);
  if (!fitted.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", fitted.status().message()));
  }
  return fitted;
}

}  // namespace flashserve::tools
