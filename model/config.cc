// config_from_gguf: hyper-parameters from `<arch>.*` GGUF keys (see model/config.h).
#include "model/config.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/gguf/gguf.h"

namespace flashserve::model {
namespace {

// One row per architecture whose keys and tensor names follow llama's layout; the columns
// are the forward-pass differences (model/config.h). window_pattern: -1, the architecture
// has no sliding window (the key is refused); else ModelConfig::sliding_window_pattern.
struct ArchitectureRow {
  const char* name;
  bool qkv_bias, qk_norm, neox_rows;
  bool gemma_block;  // embedding scale, post-norms, GeGLU (gemma3)
  int window_pattern;
  bool fused_projections = false;
};
constexpr ArchitectureRow kArchitectures[] = {
    {"llama", false, false, false, false, -1},
    {"mistral", false, false, false, false, -1},
    {"qwen2", true, false, true, false, -1},
    {"qwen3", false, true, true, false, -1},
    // llama.cpp (src/llama-model.cpp, LLM_ARCH_GEMMA3) and HF (Gemma3TextConfig's
    // sliding_window_pattern) alike: every sixth layer global. The file does not store it.
    {"gemma3", false, true, true, true, 6},
    // Phi-3's window (2,047 in Phi-3-mini's config) is on every layer in HF's Phi3; llama.cpp
    // turns it off ("Phi SWA is currently disabled"). We follow the model's own definition.
    {"phi3", false, false, true, false, 0, true},
};

const ArchitectureRow* find_architecture(const std::string& name) {
  for (const ArchitectureRow& row : kArchitectures) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

// Keys of features no forward pass here implements: a file that sets one is refused rather
// than served with the feature silently ignored.
constexpr const char* kRefusedKeys[][2] = {
    {"attention.sliding_window", "sliding-window attention"},
    {"attn_logit_softcapping", "attention logit soft-capping"},
    {"final_logit_softcapping", "final logit soft-capping"},
    {"expert_count", "mixture-of-experts layers"},
    {"attention.clamp_kqv", "Q/K/V clamping"},
};

absl::Status refuse_unimplemented_keys(const GgufFile& file, const std::string& p,
                                       const ArchitectureRow& arch) {
  for (const auto& [key, what] : kRefusedKeys) {
    if (file.find(p + key) == nullptr) continue;
    if (std::string(key) == "attention.sliding_window" && arch.window_pattern >= 0) continue;
    if (std::string(key) == "expert_count") {
      ASSIGN_OR_RETURN(const int64_t experts, file.get_int(p + key));
      if (experts == 0) continue;
    }
    return absl::UnimplementedError(absl::StrCat("config: ", p, key, " asks for ", what,
                                                 ", which flashserve does not implement"));
  }
  return absl::OkStatus();
}

// A required positive integer key that fits in int.
absl::StatusOr<int> positive_int(const GgufFile& file, const std::string& key) {
  ASSIGN_OR_RETURN(const int64_t value, file.get_int(key));
  if (value <= 0 || value > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", key, " = ", value, " must be a positive int"));
  }
  return static_cast<int>(value);
}

// An optional positive integer key: `fallback` if absent.
absl::StatusOr<int> optional_positive_int(const GgufFile& file, const std::string& key, int fallback) {
  if (file.find(key) == nullptr) return fallback;
  return positive_int(file, key);
}

// An optional positive float key: `fallback` if absent.
absl::StatusOr<float> optional_positive_float(const GgufFile& file, const std::string& key, float fallback) {
  if (file.find(key) == nullptr) return fallback;
  ASSIGN_OR_RETURN(const double value, file.get_float(key));
  if (!(value > 0) || value > std::numeric_limits<float>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", key, " = ", value, " must be positive"));
  }
  return static_cast<float>(value);
}

absl::Status read_hyper_parameters(const GgufFile& file, ModelConfig* c) {
  const std::string p = c->architecture + ".";
  ASSIGN_OR_RETURN(c->num_layers, positive_int(file, p + "block_count"));
  ASSIGN_OR_RETURN(c->hidden_size, positive_int(file, p + "embedding_length"));
  ASSIGN_OR_RETURN(c->num_heads, positive_int(file, p + "attention.head_count"));
  ASSIGN_OR_RETURN(c->num_kv_heads, optional_positive_int(file, p + "attention.head_count_kv", c->num_heads));
  ASSIGN_OR_RETURN(c->ffn_size, positive_int(file, p + "feed_forward_length"));
  ASSIGN_OR_RETURN(c->context_length, positive_int(file, p + "context_length"));
  ASSIGN_OR_RETURN(c->rope_theta, optional_positive_float(file, p + "rope.freq_base", 10000.f));
  ASSIGN_OR_RETURN(c->rms_eps, optional_positive_float(file, p + "attention.layer_norm_rms_epsilon", 1e-5f));
  if (c->num_heads % c->num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", p, "attention.head_count (", c->num_heads,
                                                   ") is not a multiple of ", p, "attention.head_count_kv (",
                                                   c->num_kv_heads, ")"));
  }
  if (file.find(p + "attention.key_length") != nullptr) {
    ASSIGN_OR_RETURN(c->head_dim, positive_int(file, p + "attention.key_length"));
    ASSIGN_OR_RETURN(const int value_length,
                     optional_positive_int(file, p + "attention.value_length", c->head_dim));
    if (value_length != c->head_dim) {
      return absl::UnimplementedError(absl::StrCat("config: ", p, "attention.value_length (", value_length,
                                                   ") differs from key_length (", c->head_dim, ")"));
    }
  } else {
    if (c->hidden_size % c->num_heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat("config: ", p, "embedding_length (", c->hidden_size,
                                                     ") is not a multiple of ", p, "attention.head_count (",
                                                     c->num_heads, ")"));
    }
    c->head_dim = c->hidden_size / c->num_heads;
  }
  if (c->head_dim % 2 != 0) {
    return absl::UnimplementedError(
        absl::StrCat("config: head_dim ", c->head_dim, " is odd; RoPE rotates pairs"));
  }
  return absl::OkStatus();
}

// rope.dimension_count must cover the whole head (no partial rotary embedding).
absl::Status check_rope_dimensions(const GgufFile& file, const ModelConfig& c) {
  const std::string key = c.architecture + ".rope.dimension_count";
  if (file.find(key) == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const int dims, positive_int(file, key));
  if (dims != c.head_dim) {
    return absl::UnimplementedError(absl::StrCat("config: ", key, " = ", dims,
                                                 " (partial rotary embedding) differs from "
                                                 "head_dim ", c.head_dim));
  }
  return absl::OkStatus();
}

// RoPE scaling: Llama 3's per-frequency factors (`rope_freqs.weight`) or a linear factor
// (`rope.scaling.type` = linear); any other scaling type is refused by name.
absl::Status read_rope_scaling(const GgufFile& file, ModelConfig* c) {
  const std::string p = c->architecture + ".rope.scaling.";
  std::string type = "none";
  if (file.find(p + "type") != nullptr) {
    ASSIGN_OR_RETURN(type, file.get_string(p + "type"));
  }
  const int half = c->head_dim / 2;
  if (type == "linear") {
    ASSIGN_OR_RETURN(const float factor, optional_positive_float(file, p + "factor", 1.f));
    if (factor != 1.f) c->rope_freq_factors.assign(half, factor);
  } else if (type != "none") {
    return absl::UnimplementedError(absl::StrCat("config: ", p, "type '", type,
                                                 "' is not supported (supported: none, linear, "
                                                 "and Llama 3 factors in rope_freqs.weight)"));
  }
  const GgufTensorInfo* freqs = file.find_tensor("rope_freqs.weight");
  if (freqs == nullptr) return absl::OkStatus();
  if (!c->rope_freq_factors.empty()) {
    return absl::UnimplementedError(
        "config: rope_freqs.weight together with linear RoPE scaling is not supported");
  }
  if (freqs->dims != std::vector<int64_t>{half}) {
    return absl::InvalidArgumentError(absl::StrCat("config: tensor 'rope_freqs.weight' has ",
                                                   freqs->num_elements, " elements, expected [",
                                                   half, "] (head_dim / 2)"));
  }
  ASSIGN_OR_RETURN(c->rope_freq_factors, file.dequantize(*freqs));
  c->rope_freqs_tensor = true;
  for (float f : c->rope_freq_factors) {
    if (!(f > 0) || !std::isfinite(f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("config: rope_freqs.weight holds ", f, "; factors must be positive"));
    }
  }
  return absl::OkStatus();
}

// A file may state which layers are local (`attention.sliding_window_pattern`: a period, or
// llama.cpp's per-layer bools, true = local). A period replaces the architecture's; a list
// must be the one the architecture implies, else the file is refused (never served with
// windows on other layers than it asks for).
absl::Status check_window_pattern(const GgufFile& file, ModelConfig* c) {
  const std::string key = c->architecture + ".attention.sliding_window_pattern";
  const GgufValue* v = file.find(key);
  if (v == nullptr || c->sliding_window == 0) return absl::OkStatus();
  if (v->is_integer()) {
    ASSIGN_OR_RETURN(const int period, positive_int(file, key));
    c->sliding_window_pattern = period;
    return absl::OkStatus();
  }
  if (v->type != GgufValueType::kArray || v->element_type != GgufValueType::kBool ||
      v->elements.size() != static_cast<size_t>(c->num_layers)) {
    return absl::InvalidArgumentError(absl::StrCat("config: ", key, " must be a positive integer or ",
                                                   c->num_layers, " bools (block_count)"));
  }
  for (int layer = 0; layer < c->num_layers; ++layer) {
    if (v->elements[layer].bool_value != c->layer_is_local(layer)) {
      return absl::UnimplementedError(absl::StrCat(
          "config: ", key, " makes layer ", layer, (c->layer_is_local(layer) ? " global" : " local"),
          "; flashserve runs ", c->architecture, "'s local layers as every layer but each ",
          c->sliding_window_pattern, "th"));
    }
  }
  return absl::OkStatus();
}

// The local layers (gemma3, phi3): the file's window and which layers it applies to.
absl::Status read_local_layers(const GgufFile& file, const ArchitectureRow& arch, ModelConfig* c) {
  if (arch.window_pattern < 0) return absl::OkStatus();
  const std::string key = c->architecture + ".attention.sliding_window";
  ASSIGN_OR_RETURN(c->sliding_window, optional_positive_int(file, key, 0));
  c->sliding_window_pattern = arch.window_pattern;
  return check_window_pattern(file, c);
}

// Gemma's block (model/config.h): the embedding scale, the post-norms, GeGLU and the
// attention scale. llama.cpp scales queries by 1 / sqrt(head_dim) except for the 27B (62
// layers), whose query_pre_attn_scalar is hidden / heads (168); the GGUF file stores
// neither, so the rule is llama.cpp's.
void set_gemma_block(const ArchitectureRow& arch, ModelConfig* c) {
  if (!arch.gemma_block) return;
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden_size));
  c->post_norms = true;
  c->gelu_ffn = true;
  if (c->num_layers == 62) {
    c->attention_scale = 1.f / std::sqrt(static_cast<float>(c->hidden_size / c->num_heads));
  }
}

absl::Status read_embeddings(const GgufFile& file, ModelConfig* c) {
  const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) return absl::InvalidArgumentError("config: tensor 'token_embd.weight' is missing");
  if (embd->dims.size() != 2 || embd->dims[0] != c->hidden_size) {
    std::string dims;
    for (int64_t d : embd->dims) absl::StrAppend(&dims, dims.empty() ? "" : ", ", d);
    return absl::InvalidArgumentError(absl::StrCat("config: tensor 'token_embd.weight' has dims [", dims,
                                                   "], expected [", c->hidden_size, ", vocab_size]"));
  }
  if (embd->dims[1] <= 0 || embd->dims[1] > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("config: vocabulary size ", embd->dims[1],
                                                   " (token_embd.weight dims[1]) must be a positive int"));
  }
  c->vocab_size = static_cast<int>(embd->dims[1]);
  c->tied_embeddings = file.find_tensor("output.weight") == nullptr;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> config_from_gguf(const GgufFile& file) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.architecture, file.get_string("general.architecture"));
  const ArchitectureRow* arch = find_architecture(c.architecture);
  if (arch == nullptr) {
    return absl::UnimplementedError(absl::StrCat("config: general.architecture '", c.architecture,
                                                 "' is not supported (supported: ",
                                                 supported_architectures(), ")"));
  }
  c.qkv_bias = arch->qkv_bias;
  c.qk_norm = arch->qk_norm;
  c.neox_rows = arch->neox_rows;
  c.fused_projections = arch->fused_projections;
  if (file.find("general.name") != nullptr) {
    ASSIGN_OR_RETURN(c.name, file.get_string("general.name"));
  }
  RETURN_IF_ERROR(read_hyper_parameters(file, &c));
  RETURN_IF_ERROR(refuse_unimplemented_keys(file, c.architecture + ".", *arch));
  RETURN_IF_ERROR(read_local_layers(file, *arch, &c));
  set_gemma_block(*arch, &c);
  RETURN_IF_ERROR(check_rope_dimensions(file, c));
  RETURN_IF_ERROR(read_rope_scaling(file, &c));
  RETURN_IF_ERROR(read_embeddings(file, &c));
  return c;
}

float ModelConfig::softmax_scale() const {
  return attention_scale > 0 ? attention_scale : 1.f / std::sqrt(static_cast<float>(head_dim));
}

std::string supported_architectures() {
  std::string names;
  for (const ArchitectureRow& row : kArchitectures) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", row.name);
  }
  return names;
}

}  // namespace flashserve::model
