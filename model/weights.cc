#include "model/weights.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "model/gguf/ggml_type.h"
#include "model/gguf/gguf.h"

namespace flashserve::model {

namespace {

// Tensor `name` with exactly `dims`: NotFound when missing, InvalidArgument naming both dims.
absl::StatusOr<const GgufTensorInfo*> find_weight_tensor(const GgufFile& file,
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
  return info;
}

}  // namespace

absl::StatusOr<std::vector<float>> load_weight_tensor(const GgufFile& file,
                                                      const std::string& name,
                                                      const std::vector<int64_t>& dims) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* info, find_weight_tensor(file, name, dims));
  return file.dequantize(*info);
}

absl::Status load_weight_tensor_into(const GgufFile& file, const std::string& name,
                                     const std::vector<int64_t>& dims, std::vector<float>* out) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* info, find_weight_tensor(file, name, dims));
  return file.dequantize_into(*info, out);
}

void permute_rows_to_adjacent_pairs(int head_dim, int64_t row_bytes, uint8_t* data,
                                    int64_t num_bytes) {
  const int half = head_dim / 2;
  const int64_t head_bytes = head_dim * row_bytes;
  std::vector<uint8_t> head(head_bytes);
  for (int64_t h = 0; (h + 1) * head_bytes <= num_bytes; ++h) {
    uint8_t* base = data + h * head_bytes;
    std::copy(base, base + head_bytes, head.begin());
    for (int i = 0; i < half; ++i) {
      std::copy_n(head.data() + i * row_bytes, row_bytes, base + (2 * i) * row_bytes);
      std::copy_n(head.data() + (i + half) * row_bytes, row_bytes,
                  base + (2 * i + 1) * row_bytes);
    }
  }
}

namespace {

// Where a layer tensor's rows go: `rows` rows (after the previous part's) into `member`.
// One part for most tensors; several for a fused one (config.fused_projections: phi3's
// attn_qkv = [Q; K; V] and ffn_up = [gate; up]).
struct TensorPart {
  std::vector<float> LayerWeights::*member;
  int64_t rows;
  bool rope_rows = false;  // Q/K rows (or a per-head vector) that RoPE pairs
};

// One tensor of a layer: its name after `blk.<i>.`, ggml dims and where its rows go.
struct LayerTensor {
  std::string name;
  std::vector<int64_t> dims;  // ggml order: [in, out], or [size] for a vector
  std::vector<TensorPart> parts;
};

// The tensors of one layer that the config needs, in load order.
std::vector<LayerTensor> layer_tensors(const ModelConfig& c) {
  const int64_t hidden = c.hidden_size, ffn = c.ffn_size;
  const int64_t q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
  std::vector<LayerTensor> t;
  // A vector [size] (one "row" an element), or a matrix [in, out].
  auto vector = [&](std::string name, int64_t size, std::vector<float> LayerWeights::*member,
                    bool rope_rows = false) {
    t.push_back({std::move(name), {size}, {{member, size, rope_rows}}});
  };
  auto matrix = [&](std::string name, int64_t in, int64_t out,
                    std::vector<float> LayerWeights::*member, bool rope_rows = false) {
    t.push_back({std::move(name), {in, out}, {{member, out, rope_rows}}});
  };
  vector("attn_norm.weight", hidden, &LayerWeights::attn_norm);
  if (c.fused_projections) {
    t.push_back({"attn_qkv.weight",
                 {hidden, q_dim + 2 * kv_dim},
                 {{&LayerWeights::wq, q_dim, true}, {&LayerWeights::wk, kv_dim, true},
                  {&LayerWeights::wv, kv_dim}}});
  } else {
    matrix("attn_q.weight", hidden, q_dim, &LayerWeights::wq, true);
    matrix("attn_k.weight", hidden, kv_dim, &LayerWeights::wk, true);
    matrix("attn_v.weight", hidden, kv_dim, &LayerWeights::wv);
  }
  matrix("attn_output.weight", q_dim, hidden, &LayerWeights::wo);
  vector("ffn_norm.weight", hidden, &LayerWeights::ffn_norm);
  if (c.fused_projections) {
    t.push_back({"ffn_up.weight", {hidden, 2 * ffn},
                 {{&LayerWeights::w_gate, ffn}, {&LayerWeights::w_up, ffn}}});
  } else {
    matrix("ffn_gate.weight", hidden, ffn, &LayerWeights::w_gate);
    matrix("ffn_up.weight", hidden, ffn, &LayerWeights::w_up);
  }
  matrix("ffn_down.weight", ffn, hidden, &LayerWeights::w_down);
  if (c.qkv_bias) {
    vector("attn_q.bias", q_dim, &LayerWeights::bq, true);
    vector("attn_k.bias", kv_dim, &LayerWeights::bk, true);
    vector("attn_v.bias", kv_dim, &LayerWeights::bv);
  }
  if (c.qk_norm) {
    vector("attn_q_norm.weight", c.head_dim, &LayerWeights::q_norm, true);
    vector("attn_k_norm.weight", c.head_dim, &LayerWeights::k_norm, true);
  }
  if (c.post_norms) {
    vector("post_attention_norm.weight", hidden, &LayerWeights::attn_post_norm);
    vector("post_ffw_norm.weight", hidden, &LayerWeights::ffn_post_norm);
  }
  return t;
}

// Every tensor name the config needs, with its dims.
std::vector<std::pair<std::string, std::vector<int64_t>>> model_tensors(const ModelConfig& c) {
  const int64_t hidden = c.hidden_size, vocab = c.vocab_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> all = {
      {"token_embd.weight", {hidden, vocab}}, {"output_norm.weight", {hidden}}};
  if (!c.tied_embeddings) all.push_back({"output.weight", {hidden, vocab}});
  if (c.rope_freqs_tensor) {
    all.push_back({"rope_freqs.weight", {static_cast<int64_t>(c.head_dim / 2)}});
  }
  const std::vector<LayerTensor> layer = layer_tensors(c);
  for (int i = 0; i < c.num_layers; ++i) {
    for (const LayerTensor& t : layer) all.push_back({absl::StrCat("blk.", i, ".", t.name), t.dims});
  }
  return all;
}

void permute_to_adjacent_pairs(int head_dim, int64_t row_length, std::vector<float>* v) {
  permute_rows_to_adjacent_pairs(head_dim, row_length * int64_t{sizeof(float)},
                                 reinterpret_cast<uint8_t*>(v->data()),
                                 static_cast<int64_t>(v->size() * sizeof(float)));
}

}  // namespace

absl::Status load_llama_layer(const GgufFile& file, const ModelConfig& c, int layer,
                              const std::function<bool(std::string_view name)>& skip,
                              LayerWeights* w) {
  const std::string prefix = absl::StrCat("blk.", layer, ".");
  std::vector<float> fused;  // a fused tensor (several parts) before it is split
  for (const LayerTensor& t : layer_tensors(c)) {
    if (skip && skip(prefix + t.name)) {
      for (const TensorPart& part : t.parts) (w->*part.member).clear();
      continue;
    }
    ASSIGN_OR_RETURN(const GgufTensorInfo* info, find_weight_tensor(file, prefix + t.name, t.dims));
    const int64_t row_length = t.dims.size() == 2 ? t.dims[0] : 1;
    std::vector<float>* all = t.parts.size() == 1 ? &(w->*t.parts[0].member) : &fused;
    RETURN_IF_ERROR(file.dequantize_into(*info, all));
    int64_t row = 0;
    for (const TensorPart& part : t.parts) {
      std::vector<float>& dst = w->*part.member;
      if (t.parts.size() > 1) {
        dst.assign(all->begin() + row * row_length, all->begin() + (row + part.rows) * row_length);
      }
      if (part.rope_rows && c.neox_rows) permute_to_adjacent_pairs(c.head_dim, row_length, &dst);
      row += part.rows;
    }
  }
  return absl::OkStatus();
}

int64_t LlamaWeights::num_parameters() const {
  int64_t n = static_cast<int64_t>(token_embd.size() + output_norm.size() + output.size());
  for (const LayerWeights& l : layers) {
    for (const auto* v : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.bq, &l.bk, &l.bv, &l.q_norm,
                          &l.k_norm, &l.wo, &l.ffn_norm, &l.w_gate, &l.w_up, &l.w_down,
                          &l.attn_post_norm, &l.ffn_post_norm}) {
      n += static_cast<int64_t>(v->size());
    }
  }
  return n;
}

absl::Status validate_model_tensors(const GgufFile& file, const ModelConfig& config) {
  RETURN_IF_ERROR(check_llama_config(config));
  RETURN_IF_ERROR(check_tensor_types(file));  // names the type and the supported ones
  absl::flat_hash_set<std::string> needed;
  for (const auto& [name, dims] : model_tensors(config)) {
    const GgufTensorInfo* info = file.find_tensor(name);
    if (info == nullptr) {
      return absl::NotFoundError(absl::StrCat("weights: tensor '", name, "' is missing"));
    }
    if (info->dims != dims) {
      return absl::InvalidArgumentError(absl::StrCat(
          "weights: tensor '", name, "' has dims [", absl::StrJoin(info->dims, ", "),
          "], the config expects [", absl::StrJoin(dims, ", "), "]"));
    }
    needed.insert(name);
  }
  for (const GgufTensorInfo& t : file.tensors()) {
    if (!needed.contains(t.name)) {
      return absl::UnimplementedError(absl::StrCat(
          "weights: tensor '", t.name, "' is not used by flashserve's '", config.architecture,
          "' architecture; refusing the file rather than ignoring it"));
    }
  }
  return absl::OkStatus();
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
    RETURN_IF_ERROR(load_llama_layer(file, config, i, {}, &w.layers[i]));
  }
  ASSIGN_OR_RETURN(w.output_norm, load_weight_tensor(file, "output_norm.weight", {hidden}));
  if (!config.tied_embeddings) {
    ASSIGN_OR_RETURN(w.output, load_weight_tensor(file, "output.weight", {hidden, vocab}));
  }
  return w;
}

}  // namespace flashserve::model
