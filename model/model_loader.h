#pragma once
// One call that turns a GGUF path into everything the server needs: the parsed file, the
// config, the tokenizer, the chat template (when the file has one) and a ModelRunner (the
// CPU backend for now; the CUDA backend will be chosen here by LoadOptions).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "model/text/chat_template.h"
#include "model/config.h"
#include "model/gguf/gguf.h"
#include "model/runner.h"
#include "model/text/tokenizer.h"

namespace flashserve::model {

struct LoadOptions {
  // KV cache size: num_kv_blocks when > 0, else kv_cache_mb MiB (K and V of all layers),
  // else kDefaultKvCacheMb.
  int num_kv_blocks = 0;
  int64_t kv_cache_mb = 0;
  int max_num_seqs = 0;  // >= 0; the cache must hold one block per sequence (0 = no check)
  int num_threads = 0;   // BLAS threads of the CPU backend; 0 = the BLAS default
};

inline constexpr int64_t kDefaultKvCacheMb = 512;

struct LoadedModel {
  std::unique_ptr<GgufFile> file;   // kept open: tokenizer and runner were built from it
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // absent when the file has no template
  std::unique_ptr<ModelRunner> runner;
};

// Opens and validates the file, dequantizes the weights (fp32, CPU backend) and allocates
// the KV cache. Errors from the GGUF reader, config, tokenizer and weights pass through
// (their messages name the key or tensor); InvalidArgument naming the option for bad
// options; ResourceExhausted when the cache budget holds fewer than max(1, max_num_seqs)
// blocks. A chat template that is present but unsupported is an error, not a silent drop.
absl::StatusOr<LoadedModel> load_model(const std::string& path, const LoadOptions& options);

}  // namespace flashserve::model
