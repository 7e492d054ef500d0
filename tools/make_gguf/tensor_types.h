#pragma once
// Per-tensor types of flashserve-make-gguf's files: one type for every 2-D weight
// (--type), or the mixture of one of llama.cpp's quantize presets (--ftype), with llama.cpp's
// fallback for rows that are not a whole number of 256-element super-blocks. The rules are
// those of llama.cpp's src/llama-quant.cpp (llama_tensor_get_type_impl and
// tensor_type_fallback) for a dense `llama`-architecture model, restricted to the presets
// below; rules for other architectures, MoE experts and 70B models do not apply here.
//
//   q4_k_m / q5_k_m: Q4_K / Q5_K everywhere, except Q6_K for output.weight (and for
//     token_embd.weight when the embeddings are tied: the output then reads it) and for
//     attn_v.weight and ffn_down.weight in the layers use_more_bits picks: the first and last
//     eighth of the layers and every third one in between (i < n/8 || i >= 7n/8 ||
//     (i - n/8) % 3 == 2; 16 layers: 0, 1, 4, 7, 10, 13, 14, 15).
//   q6_k: Q6_K everywhere.  q8_0: Q8_0 everywhere.
//   output.weight (and tied token_embd.weight) whose rows are not whole blocks of the
//   default type: Q8_0.
//   Fallback of a type whose block does not divide the row (e.g. the 576-wide rows of
//   SmolLM2-135M): Q2_K, Q3_K -> Q4_0; Q4_K -> Q5_0; Q5_K -> Q5_1; Q6_K -> Q8_0;
//   IQ4_XS -> IQ4_NL; F16 if even that block does not divide the row. The 32-element
//   types have no fallback: such a row is an error, as in llama.cpp.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/gguf/ggml_type.h"

namespace flashserve::tools {

enum class QuantMix {
  kPure,    // --type: every 2-D weight in one type (with the row fallback)
  kQ4_K_M,  // --ftype q4_k_m
  kQ5_K_M,  // --ftype q5_k_m
  kQ6_K,    // --ftype q6_k
  kQ8_0,    // --ftype q8_0
};

// "q4_k_m", "q5_k_m", "q6_k", "q8_0": the names --ftype accepts (case-insensitive).
std::vector<std::string> quant_mix_names();
// InvalidArgument listing the names when `name` is none of them.
absl::StatusOr<QuantMix> parse_quant_mix(std::string_view name);
std::string quant_mix_name(QuantMix mix);
// The type of every weight no rule changes (Q4_K for q4_k_m, ...).
model::GgmlType quant_mix_default_type(QuantMix mix);

// llama.cpp's general.file_type (enum llama_ftype): the preset's for a mixture, else the
// closest one for a pure type (Q4_K: Q4_K_S, Q3_K: Q3_K_S, ...).
uint32_t llama_file_type(QuantMix mix, model::GgmlType pure_type);

// `type` if its block divides `row_length`, else llama.cpp's fallback (see above).
// InvalidArgument naming the type and row when a type without fallback does not fit.
absl::StatusOr<model::GgmlType> fallback_for_row(model::GgmlType type, int64_t row_length);

// The type of the 2-D weight `name` ("token_embd.weight", "blk.3.attn_v.weight", ...) of
// a model of `num_layers` layers whose rows hold `row_length` values. `pure_type` is used
// for QuantMix::kPure only.
absl::StatusOr<model::GgmlType> weight_tensor_type(QuantMix mix, model::GgmlType pure_type, const std::string& name,
                                                   int64_t row_length, int num_layers, bool tied_embeddings);

}  // namespace flashserve::tools
