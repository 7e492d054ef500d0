// The CUDA backend's factory in a build without CUDA (nvcc absent or FLASHSERVE_CUDA=OFF).
#include "model/cuda/cuda_backend.h"

namespace flashserve::model {

bool cuda_backend_built() { return false; }

absl::StatusOr<std::unique_ptr<ModelRunner>> create_cuda_runner(const GgufFile&,
                                                                const ModelConfig&,
                                                                const CudaRunnerOptions&,
                                                                CudaRunnerInfo*) {
  return absl::FailedPreconditionError(
      "--device cuda: this build has no CUDA backend (built without nvcc or with "
      "-DFLASHSERVE_CUDA=OFF)");
}

}  // namespace flashserve::model
