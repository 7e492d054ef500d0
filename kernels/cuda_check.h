#pragma once
// CUDA runtime errors as absl::Status, for every host function that calls the runtime: the
// kernel launchers (kernels/*.cu) and the CUDA backend's host code (model/cuda/). Plain C++
// over the runtime API header, so host code includes it without seeing device code.
//
//   CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
//   CUDA_CHECK(cudaGetLastError());  // after a <<<...>>> launch
//       in a function returning absl::Status or absl::StatusOr<T>: a failed call returns
//       InternalError naming the file, the line, the call and the runtime's message.
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace flashserve::kernels {

inline absl::Status cuda_error_status(cudaError_t err, const char* file, int line,
                                      const char* call) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(file, ":", line, ": ", call, ": ", cudaGetErrorString(err)));
}

}  // namespace flashserve::kernels

#define CUDA_CHECK(expr)                                                                  \
  do {                                                                                    \
    if (absl::Status cuda_check_s_ =                                                      \
            ::flashserve::kernels::cuda_error_status((expr), __FILE__, __LINE__, #expr);  \
        !cuda_check_s_.ok())                                                              \
      return cuda_check_s_;                                                               \
  } while (0)
