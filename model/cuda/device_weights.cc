#include "model/cuda/device_weights.h"

#include <cuda_runtime_api.h>

#include <bit>
#include <cstring>
#include <initializer_list>
#include <string>

#include "base/bf16.h"
#include "base/status_macros.h"
#include "kernels/cuda_check.h"
#include "model/gguf/gguf.h"
#include "model/weights.h"

namespace flashserve::model::cuda {
namespace {

// Uploads the concatenation of `parts` as bf16.
absl::Status upload_bf16(std::initializer_list<const std::vector<float>*> parts,
                         DeviceBuffer* dst, int64_t* bytes) {
  size_t n = 0;
  for (const auto* p : parts) n += p->size();
  std::vector<uint16_t> host(n);
  size_t at = 0;
  for (const auto* p : parts) {
    for (float v : *p) host[at++] = fp32_to_bf16_bits(v);
  }
  RETURN_IF_ERROR(dst->allocate(n * sizeof(uint16_t)));
  CUDA_CHECK(cudaMemcpy(dst->get(), host.data(), n * sizeof(uint16_t),
                                     cudaMemcpyHostToDevice));
  *bytes += static_cast<int64_t>(n * sizeof(uint16_t));
  return absl::OkStatus();
}

// Uploads the concatenation of `parts` as fp32; nothing when they are all empty.
absl::Status upload_fp32(std::initializer_list<const std::vector<float>*> parts,
                         DeviceBuffer* dst, int64_t* bytes) {
  std::vector<float> host;
  for (const auto* p : parts) host.insert(host.end(), p->begin(), p->end());
  if (host.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(dst->allocate(host.size() * sizeof(float)));
  CUDA_CHECK(cudaMemcpy(dst->get(), host.data(), host.size() * sizeof(float),
                                     cudaMemcpyHostToDevice));
  *bytes += static_cast<int64_t>(host.size() * sizeof(float));
  return absl::OkStatus();
}

absl::Status upload_layer(const LayerWeights& w, DeviceLayer* d, int64_t* bytes) {
  RETURN_IF_ERROR(upload_fp32({&w.attn_norm}, &d->attn_norm, bytes));
  RETURN_IF_ERROR(upload_bf16({&w.wq, &w.wk, &w.wv}, &d->wqkv, bytes));
  RETURN_IF_ERROR(upload_fp32({&w.bq, &w.bk, &w.bv}, &d->bqkv, bytes));
  RETURN_IF_ERROR(upload_fp32({&w.q_norm}, &d->q_norm, bytes));
  RETURN_IF_ERROR(upload_fp32({&w.k_norm}, &d->k_norm, bytes));
  RETURN_IF_ERROR(upload_bf16({&w.wo}, &d->wo, bytes));
  RETURN_IF_ERROR(upload_fp32({&w.ffn_norm}, &d->ffn_norm, bytes));
  RETURN_IF_ERROR(upload_bf16({&w.w_gate, &w.w_up}, &d->w_gate_up, bytes));
  return upload_bf16({&w.w_down}, &d->w_down, bytes);
}

}  // namespace

absl::StatusOr<DeviceWeights> upload_llama_weights(const GgufFile& file,
                                                   const ModelConfig& config) {
  RETURN_IF_ERROR(check_llama_config(config));
  const int64_t hidden = config.hidden_size, vocab = config.vocab_size;
  DeviceWeights d;
  ASSIGN_OR_RETURN(std::vector<float> t,
                   load_weight_tensor(file, "token_embd.weight", {hidden, vocab}));
  RETURN_IF_ERROR(upload_bf16({&t}, &d.token_embd, &d.bytes));
  d.layers.resize(config.num_layers);
  for (int i = 0; i < config.num_layers; ++i) {
    ASSIGN_OR_RETURN(LayerWeights layer, load_llama_layer(file, config, i));
    RETURN_IF_ERROR(upload_layer(layer, &d.layers[i], &d.bytes));
  }
  ASSIGN_OR_RETURN(t, load_weight_tensor(file, "output_norm.weight", {hidden}));
  RETURN_IF_ERROR(upload_fp32({&t}, &d.output_norm, &d.bytes));
  if (!config.tied_embeddings) {
    ASSIGN_OR_RETURN(t, load_weight_tensor(file, "output.weight", {hidden, vocab}));
    RETURN_IF_ERROR(upload_bf16({&t}, &d.output, &d.bytes));
  }
  return d;
}

}  // namespace flashserve::model::cuda
