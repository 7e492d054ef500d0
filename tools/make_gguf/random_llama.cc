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
    {"llama-3.2-1b", {16, 2048, 32, 8, 8192, 131072, 500000.f, 1e-5f, true}},
    {"llama-3.1-8b", {32, 4096, 32, 8, 14336, 131072, 500000.f, 1e-5f, false}},
};

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
};

absl::StatusOr<std::vector<TensorPlan>> plan_tensors(const RandomLlamaOptions& o, int vocab_size) {
  const LlamaShape& s = o.shape;
  const uint64_t hidden = s.hidden_size, ffn = s.ffn_size, vocab = vocab_size;
  const uint64_t head_dim = s.hidden_size / s.num_heads;
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
    plan.push_back({std::move(name), {in, out}, *type, 0.f});
  };
  auto norm = [&](std::string name) { plan.push_back({std::move(name), {hidden}, GgmlType::kF32, 1.f}); };
  weight("token_embd.weight", hidden, vocab);
  for (int i = 0; i < s.num_layers; ++i) {
    const std::string p = absl::StrCat("blk.", i, ".");
    norm(p + "attn_norm.weight");
    weight(p + "attn_q.weight", hidden, q_dim);
    weight(p + "attn_k.weight", hidden, kv_dim);
    weight(p + "attn_v.weight", hidden, kv_dim);
    weight(p + "attn_output.weight", q_dim, hidden);
    norm(p + "ffn_norm.weight");
    weight(p + "ffn_gate.weight", hidden, ffn);
    weight(p + "ffn_up.weight", hidden, ffn);
    weight(p + "ffn_down.weight", ffn, hidden);
  }
  norm("output_norm.weight");
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
      fill_normal(chunk_seed(seed, index, c), t.mean, kWeightStd, values);
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
  w->add("general.architecture", model::gguf_string("llama"))
      .add("general.name", model::gguf_string(o.name))
      .add("general.description",
           model::gguf_string(absl::StrCat("random weights (flashserve-make-gguf --seed ", o.seed,
                                           "), not a trained model")))
      .add("general.file_type", model::gguf_u32(llama_file_type(o.mix, o.weight_type)));
  if (o.vocab_only) return;
  w->add("general.quantization_version", model::gguf_u32(2))
      .add("llama.block_count", model::gguf_u32(s.num_layers))
      .add("llama.context_length", model::gguf_u32(s.context_length))
      .add("llama.embedding_length", model::gguf_u32(s.hidden_size))
      .add("llama.feed_forward_length", model::gguf_u32(s.ffn_size))
      .add("llama.attention.head_count", model::gguf_u32(s.num_heads))
      .add("llama.attention.head_count_kv", model::gguf_u32(s.num_kv_heads))
      .add("llama.rope.freq_base", model::gguf_f32(s.rope_theta))
      .add("llama.rope.dimension_count", model::gguf_u32(s.hidden_size / s.num_heads))
      .add("llama.attention.layer_norm_rms_epsilon", model::gguf_f32(s.rms_eps))
      .add("llama.vocab_size", model::gguf_u32(vocab_size));
}

}  // namespace

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
  if (s.hidden_size % s.num_heads != 0 || (s.hidden_size / s.num_heads) % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--hidden ", s.hidden_size, " / --heads ", s.num_heads,
                                                   " must give an even whole head_dim (RoPE rotates pairs)"));
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
