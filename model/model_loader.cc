#include "model/model_loader.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/cpu/cpu_runner.h"
#include "model/cpu/llama_forward.h"

namespace flashserve::model {
namespace {

// Blocks the options ask for, given the model's bytes per block.
absl::StatusOr<int> kv_blocks_for(const LoadOptions& options, const ModelConfig& config,
                                  int block_size) {
  if (options.num_kv_blocks < 0 || options.kv_cache_mb < 0 || options.max_num_seqs < 0 ||
      options.num_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "load options must be >= 0: num_kv_blocks ", options.num_kv_blocks, ", kv_cache_mb ",
        options.kv_cache_mb, ", max_num_seqs ", options.max_num_seqs, ", num_threads ",
        options.num_threads));
  }
  int64_t num_blocks = options.num_kv_blocks;
  if (num_blocks == 0) {
    const int64_t mb = options.kv_cache_mb > 0 ? options.kv_cache_mb : kDefaultKvCacheMb;
    const int64_t per_block = PagedKvCache::bytes_per_block(
        config.num_layers, config.num_kv_heads, block_size, config.head_dim);
    num_blocks = (mb << 20) / per_block;
    if (num_blocks > (1 << 30)) num_blocks = 1 << 30;
  }
  const int64_t needed = options.max_num_seqs > 0 ? options.max_num_seqs : 1;
  if (num_blocks < needed) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KV cache of ", num_blocks, " blocks (kv_cache_mb ", options.kv_cache_mb,
        ", num_kv_blocks ", options.num_kv_blocks, ") cannot hold one block for each of ",
        needed, " sequences"));
  }
  return static_cast<int>(num_blocks);
}

// The file's chat template; none when the file has no template key.
absl::StatusOr<std::optional<ChatTemplate>> chat_template_of(const GgufFile& file) {
  if (file.find("tokenizer.chat_template") == nullptr) return std::optional<ChatTemplate>();
  absl::StatusOr<ChatTemplate> t = ChatTemplate::from_gguf(file);
  if (!t.ok()) return t.status();
  return std::optional<ChatTemplate>(std::move(*t));
}

}  // namespace

absl::StatusOr<LoadedModel> load_model(const std::string& path, const LoadOptions& options) {
  LoadedModel m;
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::open(path);
  if (!file.ok()) return file.status();
  m.file = std::move(*file);
  absl::StatusOr<ModelConfig> config = config_from_gguf(*m.file);
  if (!config.ok()) return config.status();
  m.config = *config;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = tokenizer_from_gguf(*m.file);
  if (!tokenizer.ok()) return tokenizer.status();
  m.tokenizer = std::move(*tokenizer);
  absl::StatusOr<std::optional<ChatTemplate>> chat_template = chat_template_of(*m.file);
  if (!chat_template.ok()) return chat_template.status();
  m.chat_template = std::move(*chat_template);

  CpuRunnerOptions runner_options;
  absl::StatusOr<int> num_blocks = kv_blocks_for(options, m.config, runner_options.block_size);
  if (!num_blocks.ok()) return num_blocks.status();
  runner_options.num_kv_blocks = *num_blocks;
  runner_options.num_threads = options.num_threads;
  absl::StatusOr<std::unique_ptr<CpuModelRunner>> runner =
      CpuModelRunner::from_gguf(*m.file, m.config, runner_options);
  if (!runner.ok()) return runner.status();
  m.runner = std::move(*runner);
  return m;
}

}  // namespace flashserve::model
