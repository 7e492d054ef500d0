#pragma once
// The step budget: how many query tokens (prefill chunks + decodes) one engine step may carry
// when --max-batch-tokens is not given (0: "the backend's default"). The scheduler
// (server/engine/scheduler.h) fills steps up to it and the backend sizes its step workspace
// for it at start, so the loader resolves it once and the engine takes the loader's value
// (LoadedModel::max_batch_tokens).
//
// Why a larger budget on large Hopper GPUs: a step's fixed costs are paid once a step,
// whatever its size. The one that matters is the CUDA backend's native quantized weights past
// the quantized GEMM's crossover (model/cuda/native_gemm_path.h): every matrix is dequantized
// to bf16 each step that carries more than kernels::quant_gemm_max_tokens() tokens (~3.3 ms
// of a 2,048-token 8B Q4_K_M step). Measured (bench/serving/NOTES.md, step 32; H100 80GB,
// 8B Q4_K_M served at 256 streams, one round each): native / bf16 tokens/s 0.972 at 2,048,
// 0.995 at 4,096, 1.004 at 8,192, the bf16 path's tokens/s the same at all three (15,535-
// 15,583); what it costs is latency under a full wave of prompts: ITL p99 54-58 ms at 2,048
// against 194 at 8,192, TTFT p50 159-172 against 408-424 ms (TTFT p99 810-873 against
// 774-777). vLLM makes the same choice for its API server (8,192 tokens a step on GPUs of
// >= 70 GiB but the A100, 2,048 below); ours is taken only where it was measured (compute
// capability 9.0: H100, H200). --max-batch-tokens 2048 keeps the lower latency.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace flashserve::model {

inline constexpr int kDefaultStepTokens = 2048;
inline constexpr int kLargeGpuStepTokens = 8192;
inline constexpr int64_t kLargeGpuBytes = int64_t{70} << 30;

// The CUDA backend's default budget for a device of `total_bytes` of memory and compute
// capability `major`.`minor`.
constexpr int cuda_default_step_tokens(int64_t total_bytes, int major, int minor) {
  return total_bytes >= kLargeGpuBytes && major == 9 && minor == 0 ? kLargeGpuStepTokens
                                                                    : kDefaultStepTokens;
}

// A start-up error when the budget was the device's default, not the user's: where the
// default's step workspace does not fit (ResourceExhausted), the message gains that the size
// was this GPU's default and the flag that makes the workspace smaller (it grows linearly
// with the budget). Every other status is returned as it is.
inline absl::Status explain_default_step_budget(absl::Status st, int budget) {
  if (!absl::IsResourceExhausted(st) || budget <= kDefaultStepTokens) return st;
  return absl::ResourceExhaustedError(
      absl::StrCat(st.message(), "; ", budget, " tokens a step is this GPU's default: ",
                   "--max-batch-tokens ", kDefaultStepTokens,
                   " starts with a smaller step workspace"));
}

}  // namespace flashserve::model
