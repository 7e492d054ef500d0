#pragma once
// The CUDA backend as the model loader sees it: a factory that needs no CUDA headers, so that
// a build without CUDA links the same loader (model/cuda/cuda_backend_none.cc answers it).
//
// The runner (model/cuda/cuda_runner.cc) runs the whole forward pass on one GPU: bf16
// weights dequantized from any GGUF type at load, GEMMs through cuBLASLt (bf16 operands,
// fp32 accumulation), our attention kernels in every layer, sampling on the device, and a
// bf16 paged KV cache sized from the memory left after the weights.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/memory_budget.h"
#include "model/runner.h"

namespace flashserve::model {

class GgufFile;

struct CudaRunnerOptions {
  // KV cache size (model/memory_budget.h): what the request asks, else what fits in
  // gpu_memory_fraction of the device's memory after the weights, the step workspace and
  // whatever other processes hold.
  KvCacheRequest kv_cache;
  double gpu_memory_fraction = 0.9;  // (0, 1]
  // Largest step the workspace is sized for at start (it grows if a batch is larger); 0: the
  // device's default (model/step_budget.h), which CudaRunnerInfo::max_batch_tokens reports.
  int max_batch_tokens = 0;
  int max_num_seqs = 64;
  // Decode steps replay CUDA graphs (model/cuda/decode_graph.h); off launches the same
  // kernels on the same padded shapes one by one (identical results, for comparison).
  bool cuda_graphs = true;
  // Quantized matrices stay in their GGUF block format on the device (Q8_0, Q4_0, Q4_1,
  // Q4_K, Q5_K, Q6_K: model/cuda/device_weights.h); false: every matrix bf16.
  bool native_weights = true;
};

// What start-up logs: device, memory taken by weights and KV cache, kernels chosen.
struct CudaRunnerInfo {
  std::string summary;
  int max_batch_tokens = 0;  // the step budget the workspace was sized for (resolved)
};

// Whether this build has the CUDA backend (the device count is kernels/device.h's).
bool cuda_backend_built();

// FailedPrecondition when no GPU is visible or the build has no CUDA backend; Unimplemented
// naming the value for an unsupported GPU (compute capability < 8.0), head_dim (not 64 or
// 128), GQA ratio or architecture; ResourceExhausted naming the bytes asked and available
// when weights or cache do not fit; InvalidArgument naming a bad option; errors of the
// weights loader pass through.
absl::StatusOr<std::unique_ptr<ModelRunner>> create_cuda_runner(const GgufFile& file,
                                                                const ModelConfig& config,
                                                                const CudaRunnerOptions& options,
                                                                CudaRunnerInfo* info);

}  // namespace flashserve::model
