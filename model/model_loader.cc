#include "model/model_loader.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "kernels/device.h"
#include "model/cpu/cpu_runner.h"
#include "model/cpu/llama_forward.h"
#include "model/cuda/cuda_backend.h"
#include "model/memory_budget.h"
#include "model/step_budget.h"
#include "model/weights.h"

namespace flashserve::model {
namespace {

// The user's request for the cache size, as the resolver (model/memory_budget.h) takes it.
KvCacheRequest kv_request(const LoadOptions& o) {
  return {o.num_kv_blocks, o.kv_cache_tokens, o.kv_cache_mb};
}

// Bytes the CPU weights take: the file's tensors as stored (native), or every element as
// fp32 (dequantized; an upper bound for native files with unquantized types too).
int64_t cpu_weight_bytes(const GgufFile& file, bool native) {
  int64_t n = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    n += native ? static_cast<int64_t>(t.num_bytes) : t.num_elements * int64_t{sizeof(float)};
  }
  return n;
}

// The CPU backend keeps quantized matrices in their block format unless --weights bf16 asks
// for weights dequantized at load (there fp32, the reference path).
bool cpu_native_weights(const LoadOptions& o) { return o.weights != Weights::kBf16; }

// Bytes of the CPU forward pass's workspace (model/cpu/llama_forward.h, ForwardWorkspace)
// for a step of `max_tokens` tokens and `max_seqs` sampled sequences: fp32 activations per
// token, and the last hidden state and a row of logits per sequence.
int64_t cpu_workspace_bytes(const ModelConfig& c, int64_t max_tokens, int64_t max_seqs) {
  const int64_t q_width = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_width = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t per_token = 2 * int64_t{c.hidden_size} + 2 * q_width + 2 * kv_width +
                            2 * int64_t{c.ffn_size} + c.head_dim;
  const int64_t per_seq = int64_t{c.hidden_size} + c.vocab_size;
  return (max_tokens * per_token + max_seqs * per_seq) * int64_t{sizeof(float)};
}

// Host memory on the CPU backend, checked before anything is allocated: the weights (the
// file's blocks, or fp32 with --weights bf16), then the step workspace for max_batch_tokens,
// then the cache (fp32, kDefaultKvCacheMb unless asked otherwise) in what the two leave of
// the memory available.
absl::StatusOr<KvCacheBudget> cpu_memory_budget(const LoadOptions& options,
                                                const GgufFile& file, const ModelConfig& config,
                                                int block_size) {
  const int64_t available = host_available_bytes();
  const bool native = cpu_native_weights(options);
  const int64_t weights = cpu_weight_bytes(file, native);
  RETURN_IF_ERROR(check_fits(native ? "the model's weights (the file's blocks on the CPU backend)"
                                    : "the model's weights (fp32 on the CPU backend)",
                             weights, available, "host memory"));
  // A step samples at most one token per sequence and per token of the step.
  const int64_t max_seqs = options.max_batch_tokens > 0
                               ? std::min(options.max_num_seqs, options.max_batch_tokens)
                               : options.max_num_seqs;
  const int64_t workspace =
      cpu_workspace_bytes(config, options.max_batch_tokens, std::max<int64_t>(max_seqs, 1));
  RETURN_IF_ERROR(check_fits(
      absl::StrCat("max_batch_tokens ", options.max_batch_tokens, " and max_num_seqs ",
                   options.max_num_seqs, ": the CPU step workspace"),
      workspace, available - weights, "host memory (after the weights)"));
  KvCacheGeometry g;
  g.bytes_per_block = PagedKvCache::bytes_per_block(config.num_layers, config.num_kv_heads,
                                                    block_size, config.head_dim);
  g.block_size = block_size;
  g.available_bytes = available - weights - workspace;
  g.default_bytes = kDefaultKvCacheMb << 20;
  g.default_source = absl::StrCat("the CPU default of ", kDefaultKvCacheMb, " MiB");
  g.memory_name = "host memory (after the weights and the step workspace)";
  g.min_blocks = std::max(options.max_num_seqs, 1);
  return resolve_kv_cache(kv_request(options), g);
}

// The file's chat template; none when the file has no template key.
absl::StatusOr<std::optional<ChatTemplate>> chat_template_of(const GgufFile& file) {
  if (file.find("tokenizer.chat_template") == nullptr) return std::optional<ChatTemplate>();
  ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::from_gguf(file));
  return std::optional<ChatTemplate>(std::move(t));
}

absl::Status check_options(const LoadOptions& o) {
  if (o.num_kv_blocks < 0 || o.kv_cache_tokens < 0 || o.kv_cache_mb < 0 ||
      o.max_num_seqs < 0 || o.max_batch_tokens < 0 || o.num_threads < 0 ||
      !(o.gpu_memory_fraction > 0 && o.gpu_memory_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "load options must be >= 0: num_kv_blocks ", o.num_kv_blocks, ", kv_cache_tokens ",
        o.kv_cache_tokens, ", kv_cache_mb ", o.kv_cache_mb, ", max_num_seqs ", o.max_num_seqs,
        ", max_batch_tokens ", o.max_batch_tokens, ", num_threads ", o.num_threads,
        "; gpu_memory_fraction ", o.gpu_memory_fraction, " must be in (0, 1]"));
  }
  return absl::OkStatus();
}

absl::Status load_cpu_runner(const LoadOptions& asked, LoadedModel* m, std::string why) {
  LoadOptions options = asked;
  if (options.max_batch_tokens == 0) options.max_batch_tokens = kDefaultStepTokens;
  CpuRunnerOptions runner_options;
  ASSIGN_OR_RETURN(const KvCacheBudget kv,
                   cpu_memory_budget(options, *m->file, m->config, runner_options.block_size));
  runner_options.num_kv_blocks = kv.num_blocks;
  runner_options.num_threads = options.num_threads;
  runner_options.native_weights = cpu_native_weights(options);
  ASSIGN_OR_RETURN(std::unique_ptr<CpuModelRunner> runner,
                   CpuModelRunner::from_gguf(*m->file, m->config, runner_options));
  m->backend_summary = absl::StrFormat(
      "cpu%s: weights %.1f MiB (%s; %s products, %d threads); KV cache %d blocks x %d tokens "
      "= %d tokens, %.1f MiB fp32 (%s)",
      why.empty() ? "" : " (" + why + ")", runner->weights().num_bytes() / double(1 << 20),
      runner->weights().summary(), kernels::cpu_isa_name(runner->isa()), runner->num_threads(),
      kv.num_blocks, runner_options.block_size, kv.num_blocks * runner_options.block_size,
      kv.bytes / double(1 << 20), kv.source);
  m->runner = std::move(runner);
  m->device = "cpu";
  m->max_batch_tokens = options.max_batch_tokens;
  return absl::OkStatus();
}

absl::Status load_cuda_runner(const LoadOptions& options, LoadedModel* m) {
  CudaRunnerOptions o;
  o.kv_cache = kv_request(options);
  o.gpu_memory_fraction = options.gpu_memory_fraction;
  o.max_batch_tokens = options.max_batch_tokens;  // 0: the device's default
  o.max_num_seqs = std::max(options.max_num_seqs, 1);
  o.cuda_graphs = options.cuda_graphs;
  o.native_weights = options.weights != Weights::kBf16;
  CudaRunnerInfo info;
  ASSIGN_OR_RETURN(m->runner, create_cuda_runner(*m->file, m->config, o, &info));
  m->device = "cuda";
  m->backend_summary = info.summary;
  m->max_batch_tokens = info.max_batch_tokens;
  return absl::OkStatus();
}

}  // namespace

absl::Status check_device_available(Device device) {
  if (device != Device::kCuda) return absl::OkStatus();
  if (!cuda_backend_built()) {
    return absl::FailedPreconditionError(
        "device cuda: this build has no CUDA backend (built without nvcc or with "
        "-DFLASHSERVE_CUDA=OFF)");
  }
  if (kernels::cuda_device_count() == 0) {
    return absl::FailedPreconditionError("device cuda: no CUDA device is visible");
  }
  return absl::OkStatus();
}

absl::StatusOr<Weights> parse_weights(const std::string& name) {
  if (name == "auto") return Weights::kAuto;
  if (name == "native") return Weights::kNative;
  if (name == "bf16") return Weights::kBf16;
  return absl::InvalidArgumentError(
      absl::StrCat("weights: '", name, "' is not one of auto, native, bf16"));
}

absl::StatusOr<Device> parse_device(const std::string& name) {
  if (name == "auto") return Device::kAuto;
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("device: '", name, "' is not one of auto, cpu, cuda"));
}

absl::StatusOr<LoadedModel> load_model(const std::string& path, const LoadOptions& options) {
  RETURN_IF_ERROR(check_options(options));
  LoadedModel m;
  ASSIGN_OR_RETURN(m.file, GgufFile::open(path));
  ASSIGN_OR_RETURN(m.config, config_from_gguf(*m.file));
  RETURN_IF_ERROR(validate_model_tensors(*m.file, m.config));  // before anything is sized
  ASSIGN_OR_RETURN(m.tokenizer, tokenizer_from_gguf(*m.file));
  ASSIGN_OR_RETURN(m.chat_template, chat_template_of(*m.file));

  if (options.device == Device::kCpu) {
    RETURN_IF_ERROR(load_cpu_runner(options, &m, ""));
    return m;
  }
  if (options.device == Device::kCuda) {
    RETURN_IF_ERROR(load_cuda_runner(options, &m));
    return m;
  }
  // auto: the GPU when it can serve this model, else the CPU with the reason logged. Only
  // "no usable GPU" falls back; running out of memory on a usable GPU is an error.
  std::string why;
  if (!cuda_backend_built()) {
    why = "this build has no CUDA backend";
  } else if (kernels::cuda_device_count() == 0) {
    why = "no CUDA device is visible";
  } else {
    absl::Status st = load_cuda_runner(options, &m);
    if (st.ok()) return m;
    if (st.code() != absl::StatusCode::kUnimplemented) return st;
    why = std::string(st.message());
  }
  RETURN_IF_ERROR(load_cpu_runner(options, &m, why));
  return m;
}

}  // namespace flashserve::model
