// config_from_gguf: hyper-parameters from `<arch>.*` GGUF keys (see model/config.h).
#include "model/config.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/gguf/gguf.h"

namespace flashserve::model {
namespace {

// Architectures whose GGUF keys and tensor names follow llama's layout (the differences,
// such as Qwen2's attention biases, are the forward pass's concern, not the config's).
bool is_llama_family(const std::string& arch) {
  return arch == "llama" || arch == "qwen2" || arch == "mistral";
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
  return absl::OkStatus();
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
  if (!is_llama_family(c.architecture)) {
    return absl::UnimplementedError(absl::StrCat("config: general.architecture '", c.architecture,
                                                 "' is not supported (supported: llama, qwen2, mistral)"));
  }
  if (file.find("general.name") != nullptr) {
    ASSIGN_OR_RETURN(c.name, file.get_string("general.name"));
  }
  RETURN_IF_ERROR(read_hyper_parameters(file, &c));
  RETURN_IF_ERROR(read_embeddings(file, &c));
  return c;
}

}  // namespace flashserve::model
