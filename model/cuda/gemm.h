#pragma once
// The GEMMs of the forward pass through cuBLASLt: y[m, n] = x[m, k] * w[n, k]^T (+ y), bf16
// operands, fp32 accumulation (CUBLAS_COMPUTE_32F), output bf16 or fp32. `w` keeps GGUF's
// row-major [out][in] order (model/weights.h), so in cuBLAS' column-major terms this is
// y^T = op_T(w) * x^T with no data movement.
//
// Plans (matmul descriptor, layouts, algorithm) are cached per shape. The algorithm comes from
// cuBLASLt's heuristic at m rounded up to a power of two, checked for the exact m (another
// heuristic query only where the check fails): an eager step's token count takes any value up
// to --max-batch-tokens, and a new algorithm per new m costs the query and, on its first
// launch, the loading of another kernel; with buckets a serving run meets ~12 per shape.
// Not thread-safe: one per runner (the engine thread).
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/cuda/device_buffer.h"

typedef struct CUstream_st* cudaStream_t;
struct cublasLtContext;

namespace flashserve::model::cuda {

enum class GemmOut {
  kBf16,            // y = x w^T, bf16
  kFp32,            // y = x w^T, fp32
  kFp32Accumulate,  // y += x w^T, fp32 (the residual add of the O and down projections)
};

class Gemm {
 public:
  static absl::StatusOr<std::unique_ptr<Gemm>> create();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // x: [m, k] bf16   w: [n, k] bf16   y: [m, n] per `out`. Device pointers, 16-byte aligned.
  absl::Status linear(const void* x, const void* w, void* y, int m, int n, int k, GemmOut out,
                      cudaStream_t stream);

 // cuBLASLt's scratch, allocated by create(): enough for its split-K and stream-K
  // algorithms at our shapes.
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

 private:
  struct Plan;
  struct Key {
    int m, n, k;
    GemmOut out;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& key) {
      return H::combine(std::move(h), key.m, key.n, key.k, key.out);
    }
  };
  Gemm() = default;
  absl::StatusOr<const Plan*> plan(const Key& key);
  // The heuristic's first algorithm for key's shape, into p (whose descriptors it is).
  absl::Status query_algo(const Key& key, Plan* p);

  cublasLtContext* handle_ = nullptr;
  DeviceBuffer workspace_;
  absl::flat_hash_map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace flashserve::model::cuda
