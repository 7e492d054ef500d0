#include "model/cpu/cpu_weights.h"

#include <cstring>
#include <initializer_list>
#include <map>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/quant_matmul.h"
#include "model/gguf/gguf.h"

namespace flashserve::model {
namespace {

using kernels::WeightFormat;

CpuMatrix fp32_matrix(const std::vector<float>& v, int64_t rows, int64_t cols) {
  CpuMatrix m;
  m.f32 = v.data();
  m.rows = rows;
  m.cols = cols;
  return m;
}

// The block formats the quantized products read; nullopt for every other type.
std::optional<WeightFormat> block_format(GgmlType t) {
  switch (t) {
    case GgmlType::kQ8_0: return WeightFormat::kQ8_0;
    case GgmlType::kQ4_0: return WeightFormat::kQ4_0;
    case GgmlType::kQ4_1: return WeightFormat::kQ4_1;
    case GgmlType::kQ4_K: return WeightFormat::kQ4_K;
    case GgmlType::kQ5_K: return WeightFormat::kQ5_K;
    case GgmlType::kQ6_K: return WeightFormat::kQ6_K;
    default: return std::nullopt;
  }
}

// Builds a CpuWeights from a GGUF file, owning what it has to copy.
class NativeLoader {
 public:
  NativeLoader(const GgufFile& file, const ModelConfig& c, CpuWeights* w,
               std::vector<std::vector<float>>* floats, std::vector<std::vector<uint8_t>>* copies,
               int64_t* vector_bytes)
      : file_(file), c_(c), w_(w), floats_(floats), copies_(copies), vector_bytes_(vector_bytes) {}

  // A 1-D tensor as fp32 (rope_rows: permuted per head like Q/K rows).
  absl::StatusOr<const float*> vector(const std::string& name, int64_t size, bool rope_rows) {
    ASSIGN_OR_RETURN(std::vector<float> v, load_weight_tensor(file_, name, {size}));
    if (rope_rows && c_.neox_rows) {
      permute_rows_to_adjacent_pairs(c_.head_dim, sizeof(float),
                                     reinterpret_cast<uint8_t*>(v.data()), size * 4);
    }
    *vector_bytes_ += size * 4;
    floats_->push_back(std::move(v));
    return floats_->back().data();
  }

  // A [rows, cols] matrix (ggml dims [cols, rows]): its blocks in place, or fp32.
  absl::StatusOr<CpuMatrix> matrix(const std::string& name, int64_t rows, int64_t cols,
                                   bool rope_rows) {
    CpuMatrix m;
    RETURN_IF_ERROR(matrices(name, cols, {{&m, rows, rope_rows}}));
    return m;
  }

  // One part of a tensor's rows (a fused tensor, config.fused_projections, has several):
  // `rows` rows after the previous part's, into `m`.
  struct Part {
    CpuMatrix* m;
    int64_t rows;
    bool rope_rows;
  };
  // The parts of a [sum of rows, cols] matrix (ggml dims [cols, sum of rows]) as views: its
  // blocks in place (copied where RoPE rows are permuted), or fp32.
  absl::Status matrices(const std::string& name, int64_t cols, std::initializer_list<Part> parts) {
    int64_t total = 0;
    bool permute = false;
    for (const Part& part : parts) total += part.rows, permute |= part.rope_rows && c_.neox_rows;
    const GgufTensorInfo* info = file_.find_tensor(name);
    const std::optional<WeightFormat> f =
        info != nullptr ? block_format(info->type) : std::nullopt;
    const bool blocks = f.has_value() && cols % kernels::weight_block_elements(*f) == 0 &&
                        info->dims == std::vector<int64_t>{cols, total};
    const int64_t row_bytes = blocks ? kernels::quant_row_bytes(*f, cols) : cols * 4;
    uint8_t* base = nullptr;
    if (!blocks) {
      ASSIGN_OR_RETURN(std::vector<float> v, load_weight_tensor(file_, name, {cols, total}));
      floats_->push_back(std::move(v));
      base = reinterpret_cast<uint8_t*>(floats_->back().data());
    } else {
      if (static_cast<uint64_t>(total * row_bytes) != info->num_bytes) {
        return absl::DataLossError(absl::StrCat("weights: tensor '", name, "' holds ",
                                                info->num_bytes, " bytes, expected ",
                                                total * row_bytes));
      }
      if (!permute) {
        base = const_cast<uint8_t*>(info->data);  // never written: nothing is permuted
      } else {
        copies_->emplace_back(info->data, info->data + info->num_bytes);
        base = copies_->back().data();
      }
    }
    int64_t row = 0;
    for (const Part& part : parts) {
      uint8_t* at = base + row * row_bytes;
      if (part.rope_rows && c_.neox_rows) {
        permute_rows_to_adjacent_pairs(c_.head_dim, row_bytes, at, part.rows * row_bytes);
      }
      CpuMatrix m;
      m.rows = part.rows;
      m.cols = cols;
      if (blocks) {
        m.format = *f;
        m.row_bytes = row_bytes;
        m.blocks = at;
      } else {
        m.f32 = reinterpret_cast<const float*>(at);
      }
      *part.m = m;
      row += part.rows;
    }
    return absl::OkStatus();
  }

  absl::Status layer(int i, CpuLayerWeights* l) {
    const std::string p = absl::StrCat("blk.", i, ".");
    const int64_t hidden = c_.hidden_size, ffn = c_.ffn_size;
    const int64_t q_dim = int64_t{c_.num_heads} * c_.head_dim;
    const int64_t kv_dim = int64_t{c_.num_kv_heads} * c_.head_dim;
    ASSIGN_OR_RETURN(l->attn_norm, vector(p + "attn_norm.weight", hidden, false));
    if (c_.fused_projections) {
      RETURN_IF_ERROR(matrices(p + "attn_qkv.weight", hidden,
                            {{&l->wq, q_dim, true}, {&l->wk, kv_dim, true}, {&l->wv, kv_dim, false}}));
      RETURN_IF_ERROR(matrices(p + "ffn_up.weight", hidden, {{&l->w_gate, ffn, false}, {&l->w_up, ffn, false}}));
    } else {
      ASSIGN_OR_RETURN(l->wq, matrix(p + "attn_q.weight", q_dim, hidden, true));
      ASSIGN_OR_RETURN(l->wk, matrix(p + "attn_k.weight", kv_dim, hidden, true));
      ASSIGN_OR_RETURN(l->wv, matrix(p + "attn_v.weight", kv_dim, hidden, false));
      ASSIGN_OR_RETURN(l->w_gate, matrix(p + "ffn_gate.weight", ffn, hidden, false));
      ASSIGN_OR_RETURN(l->w_up, matrix(p + "ffn_up.weight", ffn, hidden, false));
    }
    ASSIGN_OR_RETURN(l->wo, matrix(p + "attn_output.weight", hidden, q_dim, false));
    ASSIGN_OR_RETURN(l->ffn_norm, vector(p + "ffn_norm.weight", hidden, false));
    ASSIGN_OR_RETURN(l->w_down, matrix(p + "ffn_down.weight", hidden, ffn, false));
    if (c_.qkv_bias) {
      ASSIGN_OR_RETURN(l->bq, vector(p + "attn_q.bias", q_dim, true));
      ASSIGN_OR_RETURN(l->bk, vector(p + "attn_k.bias", kv_dim, true));
      ASSIGN_OR_RETURN(l->bv, vector(p + "attn_v.bias", kv_dim, false));
    }
    if (c_.qk_norm) {
      ASSIGN_OR_RETURN(l->q_norm, vector(p + "attn_q_norm.weight", c_.head_dim, true));
      ASSIGN_OR_RETURN(l->k_norm, vector(p + "attn_k_norm.weight", c_.head_dim, true));
    }
    if (c_.post_norms) {
      ASSIGN_OR_RETURN(l->attn_post_norm, vector(p + "post_attention_norm.weight", hidden, false));
      ASSIGN_OR_RETURN(l->ffn_post_norm, vector(p + "post_ffw_norm.weight", hidden, false));
    }
    return absl::OkStatus();
  }

  absl::Status all() {
    RETURN_IF_ERROR(check_llama_config(c_));
    const int64_t hidden = c_.hidden_size, vocab = c_.vocab_size;
    ASSIGN_OR_RETURN(w_->token_embd, matrix("token_embd.weight", vocab, hidden, false));
    w_->layers.resize(c_.num_layers);
    for (int i = 0; i < c_.num_layers; ++i) RETURN_IF_ERROR(layer(i, &w_->layers[i]));
    ASSIGN_OR_RETURN(w_->output_norm, vector("output_norm.weight", hidden, false));
    if (c_.tied_embeddings) {
      w_->lm_head = w_->token_embd;
    } else {
      ASSIGN_OR_RETURN(w_->lm_head, matrix("output.weight", vocab, hidden, false));
    }
    return absl::OkStatus();
  }

 private:
  const GgufFile& file_;
  const ModelConfig& c_;
  CpuWeights* w_;
  std::vector<std::vector<float>>* floats_;
  std::vector<std::vector<uint8_t>>* copies_;
  int64_t* vector_bytes_;
};

template <typename F>
void for_each_matrix(const CpuWeights& w, F&& f) {
  f(w.token_embd);
  for (const CpuLayerWeights& l : w.layers) {
    for (const CpuMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) f(*m);
  }
  if (w.lm_head.f32 != w.token_embd.f32 || w.lm_head.blocks != w.token_embd.blocks) f(w.lm_head);
}

}  // namespace

void CpuMatrix::row_to_float(int64_t r, float* dst) const {
  if (!quantized()) {
    std::memcpy(dst, f32 + r * cols, cols * sizeof(float));
    return;
  }
  // Cannot fail: cols is a whole number of blocks of a format the reference decodes.
  (void)kernels::dequantize_ggml_cpu(format, blocks + r * row_bytes, cols, dst);
}

std::shared_ptr<const CpuWeights> CpuWeights::from_fp32(
    std::shared_ptr<const LlamaWeights> fp32) {
  auto w = std::make_shared<CpuWeights>();
  const LlamaWeights& f = *fp32;
  const int64_t hidden = static_cast<int64_t>(f.output_norm.size());
  w->token_embd = fp32_matrix(f.token_embd, f.token_embd.size() / hidden, hidden);
  for (const LayerWeights& l : f.layers) {
    CpuLayerWeights c;
    const int64_t q_dim = l.wq.size() / hidden, kv_dim = l.wk.size() / hidden;
    const int64_t ffn = l.w_gate.size() / hidden;
    c.attn_norm = l.attn_norm.data();
    c.wq = fp32_matrix(l.wq, q_dim, hidden);
    c.wk = fp32_matrix(l.wk, kv_dim, hidden);
    c.wv = fp32_matrix(l.wv, kv_dim, hidden);
    c.wo = fp32_matrix(l.wo, hidden, q_dim);
    c.bq = l.bq.data(), c.bk = l.bk.data(), c.bv = l.bv.data();
    c.q_norm = l.q_norm.data(), c.k_norm = l.k_norm.data();
    c.ffn_norm = l.ffn_norm.data();
    c.w_gate = fp32_matrix(l.w_gate, ffn, hidden);
    c.w_up = fp32_matrix(l.w_up, ffn, hidden);
    c.w_down = fp32_matrix(l.w_down, hidden, ffn);
    c.attn_post_norm = l.attn_post_norm.data(), c.ffn_post_norm = l.ffn_post_norm.data();
    w->layers.push_back(c);
  }
  w->output_norm = f.output_norm.data();
  w->lm_head = f.output.empty() ? w->token_embd : fp32_matrix(f.output, f.output.size() / hidden, hidden);
  w->vector_bytes_ = (fp32->num_parameters() * 4) - w->num_bytes();
  w->fp32_ = std::move(fp32);
  return w;
}

absl::StatusOr<std::shared_ptr<const CpuWeights>> CpuWeights::native(const GgufFile& file,
                                                                      const ModelConfig& config) {
  auto w = std::make_shared<CpuWeights>();
  NativeLoader loader(file, config, w.get(), &w->floats_, &w->copies_, &w->vector_bytes_);
  RETURN_IF_ERROR(loader.all());
  return std::shared_ptr<const CpuWeights>(std::move(w));
}

int64_t CpuWeights::num_bytes() const {
  int64_t n = 0;
  for_each_matrix(*this, [&n](const CpuMatrix& m) { n += m.bytes(); });
  return n + vector_bytes_;
}

std::string CpuWeights::summary() const {
  std::map<std::string, std::pair<int, int64_t>> kinds;  // name -> (matrices, bytes)
  for_each_matrix(*this, [&kinds](const CpuMatrix& m) {
    auto& k = kinds[m.quantized() ? kernels::weight_format_name(m.format) : "fp32"];
    k.first += 1;
    k.second += m.bytes();
  });
  std::vector<std::string> parts;
  for (const auto& [name, k] : kinds) {
    parts.push_back(absl::StrFormat("%s %d (%.1f MiB)", name, k.first, k.second / 1048576.0));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace flashserve::model
