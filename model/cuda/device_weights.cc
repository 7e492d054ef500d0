#include "model/cuda/device_weights.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/bf16.h"
#include "base/parallel_ranges.h"
#include "base/status_macros.h"
#include "kernels/cuda_check.h"
#include "model/cuda/native_gemm_path.h"
#include "model/gguf/ggml_type.h"
#include "model/gguf/gguf.h"
#include "model/weights.h"

namespace flashserve::model::cuda {
namespace {

using kernels::WeightFormat;

// Host buffers the loader reuses from one matrix and layer to the next. A fresh vector's
// pages are first touched (zeroed by the kernel, one fault each, on the allocating core) at
// ~2.5x the cost of writing touched memory: allocated anew for every matrix, an 8B model's
// fp32 layers, bf16 copies and native blocks were ~45 GB of fresh pages (bench/serving/
// NOTES.md step 35). Reused, each buffer is touched once, at its largest size.
struct HostScratch {
  LayerWeights layer;           // one layer's fp32 tensors (those that become bf16)
  std::vector<float> vocab;     // token_embd's, then output's, fp32 values when bf16
  std::vector<uint16_t> bf16;   // a bf16 matrix before its upload
  std::vector<uint8_t> blocks;  // a native matrix's file rows, concatenated
  std::vector<uint8_t> packed;  // the same repacked (kernels::quant_repack)
};

// `v`'s storage for at least n elements; it grows and never shrinks.
template <typename T>
T* at_least(std::vector<T>* v, size_t n) {
  if (v->size() < n) v->resize(n);
  return v->data();
}

// Uploads the concatenation of `parts` as a bf16 matrix of `k` columns, through `staging`.
absl::Status upload_bf16(std::initializer_list<const std::vector<float>*> parts, int64_t k,
                         std::vector<uint16_t>* staging, DeviceMatrix* dst, int64_t* bytes) {
  size_t n = 0;
  for (const auto* p : parts) n += p->size();
  uint16_t* host = at_least(staging, n);
  size_t at = 0;
  for (const auto* p : parts) {
    const float* src = p->data();
    uint16_t* dst = host + at;
    parallel_ranges(static_cast<int64_t>(p->size()), int64_t{1} << 20, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = fp32_to_bf16_bits(src[i]);
    });
    at += p->size();
  }
  RETURN_IF_ERROR(dst->data.allocate(n * sizeof(uint16_t)));
  CUDA_CHECK(cudaMemcpy(dst->data.get(), host, n * sizeof(uint16_t), cudaMemcpyHostToDevice));
  dst->format = WeightFormat::kBf16;
  dst->rows = static_cast<int64_t>(n) / k;
  dst->k = k;
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
  CUDA_CHECK(cudaMemcpy(dst->get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  *bytes += static_cast<int64_t>(host.size() * sizeof(float));
  return absl::OkStatus();
}

// One tensor's ggml row bytes (t.num_bytes of them) into `out`, rows permuted to adjacent-
// pair RoPE order when the architecture's Q/K rows are in NEOX order (the byte version of
// model/weights.cc's permutation: rows are whole blocks).
void copy_rows(const GgufTensorInfo& t, bool permute, int head_dim, uint8_t* out) {
  if (!permute) {
    std::memcpy(out, t.data, t.num_bytes);
    return;
  }
  const int64_t row_bytes = static_cast<int64_t>(t.num_bytes) / t.num_rows();
  const int half = head_dim / 2;
  for (int64_t h = 0; h * head_dim < t.num_rows(); ++h) {
    const uint8_t* head = t.data + h * head_dim * row_bytes;
    uint8_t* dst = out + h * head_dim * row_bytes;
    for (int i = 0; i < half; ++i) {
      std::memcpy(dst + (2 * i) * row_bytes, head + i * row_bytes, row_bytes);
      std::memcpy(dst + (2 * i + 1) * row_bytes, head + (i + half) * row_bytes, row_bytes);
    }
  }
}

// The native format shared by the tensors `names` (all present, validated), or kBf16 when
// they differ, have none, or their rows are not whole blocks of it.
WeightFormat shared_format(const GgufFile& file, std::initializer_list<std::string> names) {
  WeightFormat f = WeightFormat::kBf16;
  bool first = true;
  for (const std::string& name : names) {
    const GgufTensorInfo* t = file.find_tensor(name);
    const WeightFormat g = native_format(static_cast<uint32_t>(t->type));
    if (!first && g != f) return WeightFormat::kBf16;
    if (!kernels::quant_layout_ok(g, t->row_length())) return WeightFormat::kBf16;
    f = g;
    first = false;
  }
  return f;
}

// Uploads the row-concatenation of `names` in native format f, repacked. `rope_rows[i]`
// says tensor i holds Q/K rows (permuted for NEOX architectures); missing entries are false.
absl::Status upload_native(const GgufFile& file, const ModelConfig& c,
                           std::initializer_list<std::string> names,
                           std::initializer_list<bool> rope_rows, WeightFormat f,
                           HostScratch* s, DeviceWeights* d, DeviceMatrix* dst) {
  size_t src_bytes = 0;
  for (const std::string& name : names) src_bytes += file.find_tensor(name)->num_bytes;
  uint8_t* src = at_least(&s->blocks, src_bytes);
  int64_t rows = 0, k = 0;
  size_t at = 0;
  auto rope = rope_rows.begin();
  for (const std::string& name : names) {
    const GgufTensorInfo* t = file.find_tensor(name);
    const bool rope_row = rope != rope_rows.end() && *rope++;
    copy_rows(*t, c.neox_rows && rope_row, c.head_dim, src + at);
    at += t->num_bytes;
    rows += t->num_rows();
    k = t->row_length();
  }
  const kernels::QuantLayout l = kernels::quant_layout(f, rows, k);
  uint8_t* host = at_least(&s->packed, static_cast<size_t>(l.total_bytes));
  RETURN_IF_ERROR(kernels::quant_repack(f, src, static_cast<int64_t>(src_bytes), rows, k, host,
                                        l.total_bytes));
  RETURN_IF_ERROR(dst->data.allocate(l.total_bytes));
  CUDA_CHECK(cudaMemcpy(dst->data.get(), host, l.total_bytes, cudaMemcpyHostToDevice));
  dst->format = f;
  dst->rows = rows;
  dst->k = k;
  d->bytes += l.total_bytes;
  d->native_bytes += l.total_bytes;
  d->max_dequant_bytes = std::max(d->max_dequant_bytes, rows * k * 2);
  return absl::OkStatus();
}

// Which of a layer's matrices keep the file's blocks (native, in the format named) and which
// become bf16 (kBf16), decided from the tensors' types before the layer is read, so that only
// the bf16 ones are dequantized (load_llama_layer's skip). The attention projections are
// [q; k; v] in one format when the three share it, else [q; k] + v when both parts have a
// format, else bf16; gate and up are one matrix when they share a format.
struct LayerPlan {
  WeightFormat qkv = WeightFormat::kBf16;
  WeightFormat qk = WeightFormat::kBf16, v = WeightFormat::kBf16;
  WeightFormat wo = WeightFormat::kBf16, gate_up = WeightFormat::kBf16;
  WeightFormat down = WeightFormat::kBf16;
  std::set<std::string, std::less<>> native_names;  // the tensors uploaded from their blocks
};

LayerPlan plan_layer(const GgufFile& file, const std::string& p, bool native) {
  LayerPlan l;
  if (!native) return l;
  const std::string q = p + "attn_q.weight", k = p + "attn_k.weight", v = p + "attn_v.weight";
  l.qkv = shared_format(file, {q, k, v});
  if (l.qkv == WeightFormat::kBf16) {
    const WeightFormat qk = shared_format(file, {q, k}), vf = shared_format(file, {v});
    if (qk != WeightFormat::kBf16 && vf != WeightFormat::kBf16) l.qk = qk, l.v = vf;
  }
  if (l.qkv != WeightFormat::kBf16 || l.qk != WeightFormat::kBf16) l.native_names.insert({q, k, v});
  auto matrix = [&](std::initializer_list<std::string> names, WeightFormat* f) {
    *f = shared_format(file, names);
    if (*f != WeightFormat::kBf16) l.native_names.insert(names);
  };
  matrix({p + "attn_output.weight"}, &l.wo);
  matrix({p + "ffn_gate.weight", p + "ffn_up.weight"}, &l.gate_up);
  matrix({p + "ffn_down.weight"}, &l.down);
  return l;
}

absl::Status upload_qkv(const GgufFile& file, const ModelConfig& c, const std::string& p,
                        const LayerPlan& plan, HostScratch* s, DeviceWeights* d,
                        DeviceLayer* l) {
  const std::string q = p + "attn_q.weight", k = p + "attn_k.weight", v = p + "attn_v.weight";
  if (plan.qkv != WeightFormat::kBf16) {
    return upload_native(file, c, {q, k, v}, {true, true, false}, plan.qkv, s, d, &l->wqkv);
  }
  if (plan.qk != WeightFormat::kBf16) {
    RETURN_IF_ERROR(upload_native(file, c, {q, k}, {true, true}, plan.qk, s, d, &l->wqkv));
    return upload_native(file, c, {v}, {false}, plan.v, s, d, &l->wv);
  }
  const LayerWeights& w = s->layer;
  return upload_bf16({&w.wq, &w.wk, &w.wv}, c.hidden_size, &s->bf16, &l->wqkv, &d->bytes);
}

// One matrix (or the row-concatenation of two): native in format f, or bf16 from `fp32`.
absl::Status upload_projection(const GgufFile& file, const ModelConfig& c,
                               std::initializer_list<std::string> names,
                               std::initializer_list<const std::vector<float>*> fp32, int64_t k,
                               WeightFormat f, HostScratch* s, DeviceWeights* d,
                               DeviceMatrix* dst) {
  if (f != WeightFormat::kBf16) return upload_native(file, c, names, {}, f, s, d, dst);
  return upload_bf16(fp32, k, &s->bf16, dst, &d->bytes);
}

absl::Status upload_layer(const GgufFile& file, const ModelConfig& c, int layer, bool native,
                          HostScratch* s, DeviceWeights* d) {
  const std::string p = absl::StrCat("blk.", layer, ".");
  const LayerPlan plan = plan_layer(file, p, native);
  RETURN_IF_ERROR(load_llama_layer(
      file, c, layer, [&](std::string_view name) { return plan.native_names.contains(name); },
      &s->layer));
  const LayerWeights& w = s->layer;
  DeviceLayer& l = d->layers[layer];
  RETURN_IF_ERROR(upload_fp32({&w.attn_norm}, &l.attn_norm, &d->bytes));
  RETURN_IF_ERROR(upload_qkv(file, c, p, plan, s, d, &l));
  RETURN_IF_ERROR(upload_fp32({&w.bq, &w.bk, &w.bv}, &l.bqkv, &d->bytes));
  RETURN_IF_ERROR(upload_fp32({&w.q_norm}, &l.q_norm, &d->bytes));
  RETURN_IF_ERROR(upload_fp32({&w.k_norm}, &l.k_norm, &d->bytes));
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim;
  RETURN_IF_ERROR(upload_projection(file, c, {p + "attn_output.weight"}, {&w.wo}, q_dim,
                                    plan.wo, s, d, &l.wo));
  RETURN_IF_ERROR(upload_fp32({&w.ffn_norm}, &l.ffn_norm, &d->bytes));
  RETURN_IF_ERROR(upload_projection(file, c, {p + "ffn_gate.weight", p + "ffn_up.weight"},
                                    {&w.w_gate, &w.w_up}, c.hidden_size, plan.gate_up, s, d,
                                    &l.w_gate_up));
  return upload_projection(file, c, {p + "ffn_down.weight"}, {&w.w_down}, c.ffn_size, plan.down,
                           s, d, &l.w_down);
}

// token_embd or output: native when possible, else bf16 from the fp32 values.
absl::Status upload_vocab_matrix(const GgufFile& file, const ModelConfig& c, const std::string& name,
                                 bool native, HostScratch* s, DeviceWeights* d,
                                 DeviceMatrix* dst) {
  const WeightFormat f = native ? shared_format(file, {name}) : WeightFormat::kBf16;
  if (f != WeightFormat::kBf16) return upload_native(file, c, {name}, {}, f, s, d, dst);
  RETURN_IF_ERROR(load_weight_tensor_into(file, name, {c.hidden_size, c.vocab_size}, &s->vocab));
  return upload_bf16({&s->vocab}, c.hidden_size, &s->bf16, dst, &d->bytes);
}

}  // namespace

WeightFormat native_format(uint32_t ggml_type) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ8_0: return WeightFormat::kQ8_0;
    case GgmlType::kQ4_0: return WeightFormat::kQ4_0;
    case GgmlType::kQ4_1: return WeightFormat::kQ4_1;
    case GgmlType::kQ4_K: return WeightFormat::kQ4_K;
    case GgmlType::kQ5_K: return WeightFormat::kQ5_K;
    case GgmlType::kQ6_K: return WeightFormat::kQ6_K;
    default: return WeightFormat::kBf16;
  }
}

std::string DeviceWeights::summary() const {
  constexpr double kGiB = 1 << 30;
  if (native_bytes == 0) return absl::StrFormat("bf16 %.2f GiB", bytes / kGiB);
  std::set<std::string> formats;
  auto add = [&](const DeviceMatrix& m) {
    if (m.native()) formats.insert(kernels::weight_format_name(m.format));
  };
  add(token_embd);
  add(output);
  for (const DeviceLayer& l : layers) {
    for (const DeviceMatrix* m : {&l.wqkv, &l.wv, &l.wo, &l.w_gate_up, &l.w_down}) add(*m);
  }
  std::string names;
  for (const std::string& f : formats) absl::StrAppend(&names, names.empty() ? "" : ", ", f);
  return absl::StrFormat("native (%s) %.2f GiB + bf16/fp32 %.2f GiB", names, native_bytes / kGiB,
                         (bytes - native_bytes) / kGiB);
}

absl::StatusOr<DeviceWeights> upload_llama_weights(const GgufFile& file, const ModelConfig& config,
                                                   bool native) {
  RETURN_IF_ERROR(check_llama_config(config));
  DeviceWeights d;
  HostScratch s;
  // The two vocabulary matrices one after the other, through one fp32 buffer (~2 GB for a
  // 128k vocabulary at hidden 4096), released before the layers.
  RETURN_IF_ERROR(upload_vocab_matrix(file, config, "token_embd.weight", native, &s, &d,
                                      &d.token_embd));
  if (!config.tied_embeddings) {
    RETURN_IF_ERROR(upload_vocab_matrix(file, config, "output.weight", native, &s, &d, &d.output));
  }
  s.vocab = std::vector<float>();
  d.layers.resize(config.num_layers);
  for (int i = 0; i < config.num_layers; ++i) {
    RETURN_IF_ERROR(upload_layer(file, config, i, native, &s, &d));
  }
  ASSIGN_OR_RETURN(const std::vector<float> norm,
                   load_weight_tensor(file, "output_norm.weight", {config.hidden_size}));
  RETURN_IF_ERROR(upload_fp32({&norm}, &d.output_norm, &d.bytes));
  // A layer's small matrices dequantized together for deq+blas (llama_forward.h:
  // DeviceWorkspace::group) take two buffers of the scratch at once (this layer's and the
  // next's), each at most all of a layer's, 256-byte aligned.
  for (const DeviceLayer& l : d.layers) {
    int64_t group = 0;
    for (const DeviceMatrix* m : {&l.wqkv, &l.wv, &l.wo, &l.w_gate_up, &l.w_down}) {
      if (m->native() && native_gemm_dequant_grouped(m->rows, m->k)) group += m->rows * m->k;
    }
    d.max_dequant_bytes = std::max(d.max_dequant_bytes, 2 * ((group + 127) / 128 * 128) * 2);
  }
  return d;
}

}  // namespace flashserve::model::cuda
