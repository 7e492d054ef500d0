#include "model/weights.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "model/gguf/gguf.h"

namespace flashserve::model {

absl::StatusOr<std::vector<float>> load_weight_tensor(const GgufFile& file,
                                                      const std::string& name,
                                                      const std::vector<int64_t>& dims) {
  const GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) {
    return absl::NotFoundError(absl::StrCat("weights: tensor '", name, "' is missing"));
  }
  if (info->dims != dims) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights: tensor '", name, "' has dims [", absl::StrJoin(info->dims, ", "),
                     "], the config expects [", absl::StrJoin(dims, ", "), "]"));
  }
  return file.dequantize(*info);
}

namespace {

absl::Status load_layer(const GgufFile& file, const ModelConfig& c, int layer,
                        LayerWeights* w) {
  const std::string prefix = absl::StrCat("blk.", layer, ".");
  const int64_t hidden = c.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  for (const char* bias : {"attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
    if (file.find_tensor(prefix + bias) != nullptr) {
      return absl::UnimplementedError(
          absl::StrCat("weights: tensor '", prefix, bias, "' (attention bias) is not supported"));
    }
  }
  struct Entry {
    const char* name;
    std::vector<int64_t> dims;  // ggml order: [in, out]
    std::vector<float>* dst;
  };
  const Entry entries[] = {
      {"attn_norm.weight", {hidden}, &w->attn_norm},
      {"attn_q.weight", {hidden, q_dim}, &w->wq},
      {"attn_k.weight", {hidden, kv_dim}, &w->wk},
      {"attn_v.weight", {hidden, kv_dim}, &w->wv},
      {"attn_output.weight", {q_dim, hidden}, &w->wo},
      {"ffn_norm.weight", {hidden}, &w->ffn_norm},
      {"ffn_gate.weight", {hidden, c.ffn_size}, &w->w_gate},
      {"ffn_up.weight", {hidden, c.ffn_size}, &w->w_up},
      {"ffn_down.weight", {c.ffn_size, hidden}, &w->w_down},
  };
  for (const Entry& e : entries) {
    ASSIGN_OR_RETURN(*e.dst, load_weight_tensor(file, prefix + e.name, e.dims));
  }
  return absl::OkStatus();
}

}  // namespace

int64_t LlamaWeights::num_parameters() const {
  int64_t n = static_cast<int64_t>(token_embd.size() + output_norm.size() + output.size());
  for (const LayerWeights& l : layers) {
    n += static_cast<int64_t>(l.attn_norm.size() + l.wq.size() + l.wk.size() + l.wv.size() +
                              l.wo.size() + l.ffn_norm.size() + l.w_gate.size() +
                              l.w_up.size() + l.w_down.size());
  }
  return n;
}

absl::StatusOr<LayerWeights> load_llama_layer(const GgufFile& file, const ModelConfig& config,
                                              int layer) {
  LayerWeights w;
  RETURN_IF_ERROR(load_layer(file, config, layer, &w));
  return w;
}

absl::Status check_llama_config(const ModelConfig& config) {
  if (config.num_layers <= 0 || config.hidden_size <= 0 || config.head_dim <= 0 ||
      config.num_heads <= 0 || config.num_kv_heads <= 0 || config.vocab_size <= 0 ||
      config.ffn_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights: config is incomplete (layers ", config.num_layers, ", hidden ",
                     config.hidden_size, ", heads ", config.num_heads, "/",
                     config.num_kv_heads, ", head_dim ", config.head_dim, ", ffn ",
                     config.ffn_size, ", vocab ", config.vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LlamaWeights> load_llama_weights(const GgufFile& file,
                                                const ModelConfig& config) {
  RETURN_IF_ERROR(check_llama_config(config));
  const int64_t hidden = config.hidden_size;
  const int64_t vocab = config.vocab_size;
  LlamaWeights w;
  ASSIGN_OR_RETURN(w.token_embd, load_weight_tensor(file, "token_embd.weight", {hidden, vocab}));
  w.layers.resize(config.num_layers);
  for (int i = 0; i < config.num_layers; ++i) {
    RETURN_IF_ERROR(load_layer(file, config, i, &w.layers[i]));
  }
  ASSIGN_OR_RETURN(w.output_norm, load_weight_tensor(file, "output_norm.weight", {hidden}));
  if (!config.tied_embeddings) {
    ASSIGN_OR_RETURN(w.output, load_weight_tensor(file, "output.weight", {hidden, vocab}));
  }
  return w;
}

}  // namespace flashserve::model
