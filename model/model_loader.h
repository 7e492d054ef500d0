#pragma once
// One call that turns a GGUF path into everything the server needs: the parsed file, the
// config, the tokenizer, the chat template (when the file has one) and a ModelRunner on the
// device LoadOptions asks for (the CPU backend, model/cpu/, or the CUDA backend,
// model/cuda/). This is the one place that resolves --device.
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

enum class Device { kAuto, kCpu, kCuda };
// Device weights of the CUDA backend: kNative keeps quantized matrices in their block format
// (kernels/quant/: quantized GEMVs, GEMMs, or a per-step bf16 copy where that is faster:
// model/cuda/native_gemm_path.h), kBf16 dequantizes everything at load. kAuto is kNative
// (issue 19: "default native for quantized files"): measured on the H200 (bench/serving/
// RESULTS.md, fifteenth measurement), native weights take ~0.3x the device memory of bf16 and
// serve 1.15-2.3x as fast at one stream and 0.93-1.06x at 64-256 streams (the 1B and 8B
// Q4_K_M shapes at 256 streams are the rows below 0.95x: the quantized GEMM at 256 tokens
// trails cuBLASLt on bf16 weights; `--weights bf16` is the choice there when memory allows).
enum class Weights { kAuto, kNative, kBf16 };

// "auto" | "native" | "bf16"; InvalidArgument naming the value otherwise.
absl::StatusOr<Weights> parse_weights(const std::string& name);

// "auto" | "cpu" | "cuda"; InvalidArgument naming the value otherwise.
absl::StatusOr<Device> parse_device(const std::string& name);

// OK when `device` can be used in this process: FailedPrecondition naming what is missing
// for kCuda without a CUDA build or a visible GPU (checked before anything is loaded, so
// that a server can refuse to start at once); kAuto and kCpu are always OK.
absl::Status check_device_available(Device device);

struct LoadOptions {
  // kAuto: the CUDA backend when this build has it, a GPU is visible and it supports the
  // model; otherwise the CPU backend (the reason is in LoadedModel::backend_summary).
  Device device = Device::kAuto;
  // KV cache size, the first that is set: num_kv_blocks; kv_cache_tokens (rounded up to
  // whole blocks); kv_cache_mb MiB (K and V of all layers); else the backend's default:
  // kDefaultKvCacheMb on the CPU, gpu_memory_fraction of the device on the GPU.
  int num_kv_blocks = 0;
  int64_t kv_cache_tokens = 0;
  int64_t kv_cache_mb = 0;
  double gpu_memory_fraction = 0.9;  // (0, 1]: device memory the CUDA backend may fill
  int max_num_seqs = 0;  // >= 0; the cache must hold one block per sequence (0 = no check)
  // >= 0; the step budget the step workspace is sized (CUDA) or checked against the memory
  // available (CPU) for; 0 = the backend's default (model/step_budget.h: 8,192 on an H100 or
  // H200, 2,048 on other GPUs and the CPU), which LoadedModel::max_batch_tokens reports.
  int max_batch_tokens = 0;
  int num_threads = 0;   // threads of the CPU backend (and its BLAS); 0 = every core
  bool cuda_graphs = true;  // CUDA backend: decode steps through CUDA graphs
  // CUDA backend: quantized matrices stay in their block format (kNative) or become bf16.
  // CPU backend: kAuto and kNative keep them in their block format (quantized products);
  // kBf16 dequantizes every weight at load (to fp32 there: the reference path).
  Weights weights = Weights::kAuto;
};

inline constexpr int64_t kDefaultKvCacheMb = 512;

struct LoadedModel {
  std::unique_ptr<GgufFile> file;   // kept open: tokenizer and runner were built from it
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // absent when the file has no template
  std::unique_ptr<ModelRunner> runner;
  std::string device;           // "cpu" or "cuda": where the runner runs
  std::string backend_summary;  // for the start-up log: device, memory, why
  int max_batch_tokens = 0;     // >= 1: the step budget the backend was sized for (the engine's)
};

// Opens and validates the file, loads the weights onto the device (fp32 on the CPU, bf16 on
// the GPU) and allocates the KV cache. --device cuda without a usable GPU fails with
// FailedPrecondition / Unimplemented naming what is missing (model/cuda/cuda_backend.h). Errors from the GGUF reader, config, tokenizer and weights pass through
// (their messages name the key or tensor); InvalidArgument naming the option for bad
// options; ResourceExhausted when the cache budget holds fewer than max(1, max_num_seqs)
// blocks. A chat template that is present but unsupported is an error, not a silent drop.
absl::StatusOr<LoadedModel> load_model(const std::string& path, const LoadOptions& options);

}  // namespace flashserve::model
