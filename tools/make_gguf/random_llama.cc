// write_random_llama: a random-weight Llama GGUF (see tools/make_gguf/random_llama.h).
#include "tools/make_gguf/random_llama.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <future>
#include <mutex>
#include <span>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "model/gguf/gguf.h"
#include "model/gguf/gguf_writer.h"
#include "model/gguf/quantize.h"
#include "model/text/tokenizer.h"

namespace flashserve::tools {
namespace {

using model::GgmlType;
using model::GgufFile;
using model::GgufWriter;

constexpr float kWeightStd = 0.02f;       // projections and embeddings: N(0, 0.02^2)
constexpr int64_t kChunkElements = 1 << 16;  // values generated per chunk (per seed)

struct Preset {
  const char* name;
  LlamaShape shape;
};

// Shapes of the real models (their config.json); vocab comes from --tokenizer-from.
const Preset kPresets[] = {
    {"smollm2-135m", {30, 576, 9, 3, 1536, 8192, 100000.f, 1e-5f, true}},
    {"llama-3.2-1b", {16, 2048, 32, 8, 8192, 131072, 500000.f, 1e-5f, true, "llama", 0, 32.f}},
    {"llama-3.1-8b", {32, 4096, 32, 8, 14336, 131072, 500000.f, 1e-5f, false, "llama", 0, 8.f}},
    {"qwen2.5-0.5b", {24, 896, 14, 2, 4864, 32768, 1000000.f, 1e-6f, true, "qwen2"}},
    {"qwen3-0.6b", {28, 1024, 16, 8, 3072, 40960, 1000000.f, 1e-6f, true, "qwen3", 128}},
    {"gemma-3-1b", {26, 1152, 4, 1, 6912, 32768, 1000000.f, 1e-6f, true, "gemma3", 256, 0.f, 512}},
    {"gemma-3-4b",
     {34, 2560, 8, 4, 10240, 131072, 1000000.f, 1e-6f, true, "gemma3", 256, 0.f, 1024, 8.f}},
    {"phi-3-mini", {32, 3072, 32, 32, 8192, 4096, 10000.f, 1e-5f, false, "phi3", 0, 0.f, 2047}},
};

constexpr const char* kArchitectures[] = {"llama", "mistral", "qwen2", "qwen3", "gemma3", "phi3"};
constexpr float kBiasStd = 0.5f;  // qwen2's Q/K/V biases: large, as in the real models

// ---- random values -------------------------------------------------------------------------
uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// N(mean, std^2), approximately: the sum of four 16-bit uniforms has mean 131070 and standard
// deviation 65536 / sqrt(3) (to 1e-10).
void fill_normal(uint64_t state, float mean, float std, std::span<float> out) {
  const float scale = std * 1.7320508f / 65536.f;
  for (float& v : out) {
    const uint64_t r = splitmix64(&state);
    const int64_t sum = static_cast<int64_t>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    v = mean + static_cast<float>(sum - 131070) * scale;
  }
}

uint64_t chunk_seed(uint64_t seed, size_t tensor_index, int64_t chunk) {
  uint64_t state = seed;
  uint64_t mixed = splitmix64(&state) ^ (0xD1B54A32D192ED03ull * (tensor_index + 1));
  state = mixed;
  mixed = splitmix64(&state) ^ (0x8CB92BA72F3D8DD7ull * static_cast<uint64_t>(chunk + 1));
  state = mixed;
  return splitmix64(&state);
}

// ---- the tensors ---------------------------------------------------------------------------
struct TensorPlan {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order
  GgmlType type;
  float mean;                  // 1 for norms, 0 for weights
  float std = kWeightStd;
  std::vector<float> values;   // fixed values (rope_freqs) instead of random ones
};

absl::StatusOr<std::vector<TensorPlan>> plan_tensors(const RandomLlamaOptions& o, int vocab_size) {
  const LlamaShape& s = o.shape;
  const uint64_t hidden = s.hidden_size, ffn = s.ffn_size, vocab = vocab_size;
  const uint64_t head_dim = s.resolved_head_dim();
  const uint64_t q_dim = head_dim * s.num_heads, kv_dim = head_dim * s.num_kv_heads;
  std::vector<TensorPlan> plan;
  absl::Status status;
  auto weight = [&](std::string name, uint64_t in, uint64_t out) {
    absl::StatusOr<GgmlType> type = weight_tensor_type(o.mix, o.weight_type, name, static_cast<int64_t>(in),
                                                       s.num_layers, s.tied_embeddings);
    if (!type.ok()) {
      status.Update(type.status());
      return;
    }
    plan.push_back({std::move(name), {in, out}, *type, 0.f, kWeightStd, {}});
  };
  auto norm = [&](std::string name, uint64_t dim) { plan.push_back({std::move(name), {dim}, GgmlType::kF32, 1.f, kWeightStd, {}}); };
  auto bias = [&](std::string name, uint64_t dim) {
    plan.push_back({std::move(name), {dim}, GgmlType::kF32, 0.f, kBiasStd, {}});
  };
  weight("token_embd.weight", hidden, vocab);
  if (s.llama3_rope_factor > 0) {
    plan.push_back({"rope_freqs.weight", {head_dim / 2}, GgmlType::kF32, 0.f, 0.f,
                    llama3_rope_factors(static_cast<int>(head_dim), s.rope_theta, s.llama3_rope_factor)});
  }
  for (int i = 0; i < s.num_layers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    const bool fused = s.architecture == "phi3";  // [Q; K; V] and [gate; up] in one tensor each
    norm(p + "attn_norm.weight", hidden);
    if (fused) {
      weight(p + "attn_qkv.weight", hidden, q_dim + 2 * kv_dim);
    } else {
      weight(p + "attn_q.weight", hidden, q_dim);
      weight(p + "attn_k.weight", hidden, kv_dim);
      weight(p + "attn_v.weight", hidden, kv_dim);
    }
    if (s.architecture == "qwen2") {
      bias(p + "attn_q.bias", q_dim);
      bias(p + "attn_k.bias", kv_dim);
      bias(p + "attn_v.bias", kv_dim);
    }
    if (s.architecture == "qwen3" || s.architecture == "gemma3") {
      norm(p + "attn_q_norm.weight", head_dim);
      norm(p + "attn_k_norm.weight", head_dim);
    }
    weight(p + "attn_output.weight", q_dim, hidden);
    if (s.architecture == "gemma3") norm(p + "post_attention_norm.weight", hidden);
    norm(p + "ffn_norm.weight", hidden);
    if (fused) {
      weight(p + "ffn_up.weight", hidden, 2 * ffn);
    } else {
      weight(p + "ffn_gate.weight", hidden, ffn);
      weight(p + "ffn_up.weight", hidden, ffn);
    }
    weight(p + "ffn_down.weight", ffn, hidden);
    if (s.architecture == "gemma3") norm(p + "post_ffw_norm.weight", hidden);
  }
  norm("output_norm.weight", hidden);
  if (!s.tied_embeddings) weight("output.weight", hidden, vocab);
  RETURN_IF_ERROR(status);
  return plan;
}

// Generates and encodes one tensor on `num_threads` threads. Chunks are whole rows of
// about kChunkElements values, so their boundaries (and seeds) depend on the shape only.
absl::Status fill_tensor(const TensorPlan& t, size_t index, uint64_t seed, int num_threads, std::string* data) {
  const int64_t row = static_cast<int64_t>(t.dims[0]);
  const int64_t num_rows = t.dims.size() > 1 ? static_cast<int64_t>(t.dims[1]) : 1;
  ASSIGN_OR_RETURN(const uint64_t row_bytes, model::quantized_size(t.type, row));
  data->resize(row_bytes * num_rows);
  const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkElements / row);
  const int64_t num_chunks = (num_rows + rows_per_chunk - 1) / rows_per_chunk;
  std::atomic<int64_t> next_chunk{0};
  std::mutex error_mu;
  absl::Status error;
  auto work = [&] {
    std::vector<float> values;
    for (int64_t c = next_chunk++; c < num_chunks; c = next_chunk++) {
      const int64_t first = c * rows_per_chunk, rows = std::min(rows_per_chunk, num_rows - first);
      values.resize(rows * row);
      if (!t.values.empty()) {
        std::copy_n(t.values.begin() + first * row, rows * row, values.begin());
      } else {
        fill_normal(chunk_seed(seed, index, c), t.mean, t.std, values);
      }
      auto* out = reinterpret_cast<uint8_t*>(data->data()) + first * row_bytes;
      absl::Status s = model::quantize_row(t.type, values, std::span<uint8_t>(out, rows * row_bytes));
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(error_mu);
        error = s;
      }
    }
  };
  const int num_workers = static_cast<int>(std::min<int64_t>(num_threads, num_chunks));
  std::vector<std::thread> threads;
  for (int i = 1; i < num_workers; ++i) threads.emplace_back(work);
  work();
  for (std::thread& th : threads) th.join();
  return error;
}

// ---- metadata ------------------------------------------------------------------------------
absl::StatusOr<std::unique_ptr<GgufFile>> open_tokenizer_source(const std::string& path, int* vocab_size) {
  const std::string prefix = absl::StrCat("--tokenizer-from ", path, ": ");
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::open(path);
  if (!file.ok()) return absl::InvalidArgumentError(prefix + std::string(file.status().message()));
  if ((*file)->find("tokenizer.ggml.tokens") == nullptr) {
    return absl::InvalidArgumentError(prefix + "the file has no tokenizer (key 'tokenizer.ggml.tokens' is absent)");
  }
  absl::StatusOr<std::unique_ptr<model::Tokenizer>> tokenizer = model::tokenizer_from_gguf(**file);
  if (!tokenizer.ok()) return absl::InvalidArgumentError(prefix + std::string(tokenizer.status().message()));
  *vocab_size = (*tokenizer)->vocab_size();
  return file;
}

void add_model_metadata(const RandomLlamaOptions& o, int vocab_size, GgufWriter* w) {
  const LlamaShape& s = o.shape;
  w->add("general.architecture", model::gguf_string(s.architecture))
      .add("general.name", model::gguf_string(o.name))
      .add("general.description",
           model::gguf_string(absl::StrCat("random weights (flashserve-make-gguf --seed ", o.seed,
                                           "), not a trained model")))
      .add("general.file_type", model::gguf_u32(llama_file_type(o.mix, o.weight_type)));
  if (o.vocab_only) return;
  const std::string a = s.architecture + ".";
  w->add("general.quantization_version", model::gguf_u32(2))
      .add(a + "block_count", model::gguf_u32(s.num_layers))
      .add(a + "context_length", model::gguf_u32(s.context_length))
      .add(a + "embedding_length", model::gguf_u32(s.hidden_size))
      .add(a + "feed_forward_length", model::gguf_u32(s.ffn_size))
      .add(a + "attention.head_count", model::gguf_u32(s.num_heads))
      .add(a + "attention.head_count_kv", model::gguf_u32(s.num_kv_heads))
      .add(a + "rope.freq_base", model::gguf_f32(s.rope_theta))
      .add(a + "rope.dimension_count", model::gguf_u32(s.resolved_head_dim()))
      .add(a + "attention.layer_norm_rms_epsilon", model::gguf_f32(s.rms_eps))
      .add(a + "vocab_size", model::gguf_u32(vocab_size));
  if (s.head_dim > 0) {
    w->add(a + "attention.key_length", model::gguf_u32(s.head_dim))
        .add(a + "attention.value_length", model::gguf_u32(s.head_dim));
  }
  if (s.sliding_window > 0) w->add(a + "attention.sliding_window", model::gguf_u32(s.sliding_window));
  if (s.rope_linear_factor > 0) {
    w->add(a + "rope.scaling.type", model::gguf_string("linear"))
        .add(a + "rope.scaling.factor", model::gguf_f32(s.rope_linear_factor));
  }
}

}  // namespace

std::vector<std::string> random_architectures() {
  return std::vector<std::string>(std::begin(kArchitectures), std::end(kArchitectures));
}

std::vector<float> llama3_rope_factors(int head_dim, float rope_theta, float factor) {
  // llama.cpp's converter (LlamaModel.generate_extra_tensors) from HF's rope_scaling:
  // wavelengths shorter than original / high_freq_factor keep their frequency, longer than
  // original / low_freq_factor are divided by `factor`, and the band between is smoothed.
  constexpr double kLowFreqFactor = 1, kHighFreqFactor = 4, kOriginalContext = 8192;
  const double low_wavelen = kOriginalContext / kLowFreqFactor;
  const double high_wavelen = kOriginalContext / kHighFreqFactor;
  std::vector<float> factors;
  for (int i = 0; i < head_dim; i += 2) {
    // fp32 like the converter's torch.arange(0, dim, 2, dtype=float32) / dim frequencies.
    const float freq = 1.0f / std::pow(rope_theta, static_cast<float>(i) / head_dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(factor);
    } else {
      const double smooth = (kOriginalContext / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
      factors.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

std::vector<std::string> llama_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

absl::StatusOr<LlamaShape> llama_preset(std::string_view name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return p.shape;
  }
  return absl::InvalidArgumentError(absl::StrCat("--preset '", std::string(name), "' is not one of ",
                                                 absl::StrJoin(llama_preset_names(), ", ")));
}

absl::Status validate_shape(const LlamaShape& s, GgmlType type) {
  const std::pair<const char*, int> sizes[] = {{"--layers", s.num_layers}, {"--hidden", s.hidden_size},
                                               {"--heads", s.num_heads},   {"--kv-heads", s.num_kv_heads},
                                               {"--ffn", s.ffn_size},      {"--context", s.context_length}};
  for (const auto& [flag, value] : sizes) {
    if (value <= 0) return absl::InvalidArgumentError(absl::StrCat(flag, " ", value, " must be positive"));
  }
  if (!(s.rope_theta > 0) || !std::isfinite(s.rope_theta)) {
    return absl::InvalidArgumentError(absl::StrCat("--rope-theta ", s.rope_theta, " must be positive and finite"));
  }
  if (!(s.rms_eps > 0) || !std::isfinite(s.rms_eps)) {
    return absl::InvalidArgumentError(absl::StrCat("--rms-eps ", s.rms_eps, " must be positive and finite"));
  }
  if (s.num_heads % s.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--heads ", s.num_heads, " is not a multiple of --kv-heads ", s.num_kv_heads));
  }
  if (s.head_dim == 0 && (s.hidden_size % s.num_heads != 0 || (s.hidden_size / s.num_heads) % 2 != 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--hidden ", s.hidden_size, " / --heads ", s.num_heads,
                                                   " must give an even whole head_dim (RoPE rotates pairs)"));
  }
  if (s.head_dim < 0 || s.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--head-dim ", s.head_dim, " must be even and positive"));
  }
  if (std::find(std::begin(kArchitectures), std::end(kArchitectures), s.architecture) == std::end(kArchitectures)) {
    return absl::InvalidArgumentError(absl::StrCat("--arch '", s.architecture, "' is not one of ",
                                                   absl::StrJoin(random_architectures(), ", ")));
  }
  if (s.sliding_window > 0 && s.architecture != "gemma3" && s.architecture != "phi3") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sliding-window: only --arch gemma3 and phi3 have local layers, not '", s.architecture, "'"));
  }
  for (const auto& [flag, value] : {std::pair<const char*, int>{"--hidden", s.hidden_size}, {"--ffn", s.ffn_size}}) {
    if (!fallback_for_row(type, value).ok()) {
      const int64_t block = model::ggml_type_traits(type).block_size;
      return absl::InvalidArgumentError(absl::StrCat("--type ", model::ggml_type_name(type), " stores rows in blocks of ",
                                                     block, " values: ", flag, " ", value, " is not a multiple of ", block));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RandomLlamaSummary> write_random_llama(const RandomLlamaOptions& o) {
  const GgmlType default_type = o.mix == QuantMix::kPure ? o.weight_type : quant_mix_default_type(o.mix);
  if (!model::ggml_type_can_quantize(default_type)) {
    return absl::InvalidArgumentError(absl::StrCat("--type ", model::ggml_type_name(default_type),
                                                   " cannot be written (", model::quantizable_type_names(), ")"));
  }
  RETURN_IF_ERROR(validate_shape(o.shape, default_type));
  RandomLlamaSummary summary;
  ASSIGN_OR_RETURN(const std::unique_ptr<GgufFile> source,
                   open_tokenizer_source(o.tokenizer_from, &summary.vocab_size));
  GgufWriter w;
  add_model_metadata(o, summary.vocab_size, &w);
  for (const auto& [key, value] : source->metadata()) {
    if (key.starts_with("tokenizer.")) w.add(key, value);
  }
  std::vector<TensorPlan> plan;
  if (!o.vocab_only) {
    ASSIGN_OR_RETURN(plan, plan_tensors(o, summary.vocab_size));
  }
  for (const TensorPlan& t : plan) {
    w.declare_tensor(t.name, t.dims, t.type);
    int64_t n = 1;
    for (uint64_t d : t.dims) n *= static_cast<int64_t>(d);
    summary.num_parameters += n;
  }
  const int num_threads =
      o.num_threads > 0 ? o.num_threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // Tensor i + 1 is generated (on all threads) while tensor i is written: two tensors in
  // memory at most. `pending` is declared after `next_data` so that it is destroyed (waited
  // for) first when the write stops early.
  std::string next_data;
  std::future<absl::Status> pending;
  size_t pending_index = plan.size();
  auto launch = [&](size_t i) {
    pending_index = i;
    pending = std::async(std::launch::async,
                         [&, i] { return fill_tensor(plan[i], i, o.seed, num_threads, &next_data); });
  };
  RETURN_IF_ERROR(w.write_file(o.out, [&](size_t i, std::string* data) {
    if (pending_index != i) launch(i);
    absl::Status filled = pending.get();
    data->swap(next_data);
    if (filled.ok() && i + 1 < plan.size()) launch(i + 1);
    return filled;
  }));
  summary.num_tensors = static_cast<int>(plan.size());
  std::error_code ec;
  summary.file_bytes = std::filesystem::file_size(o.out, ec);
  return summary;
}

}  // namespace flashserve::tools
