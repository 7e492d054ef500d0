#pragma once
// Host-side error plumbing of the CUDA backend: every CUDA runtime and cuBLASLt call's
// status becomes an absl::Status naming the file, line and call.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace flashserve::model::cuda {

inline absl::Status cuda_status(cudaError_t err, const char* file, int line, const char* call) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(file, ":", line, ": ", call, ": ", cudaGetErrorString(err)));
}

inline absl::Status cublas_status(cublasStatus_t st, const char* file, int line,
                                  const char* call) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(file, ":", line, ": ", call, ": cuBLAS status ",
                                          static_cast<int>(st)));
}

}  // namespace flashserve::model::cuda

#define FS_CUDA_RETURN_IF_ERROR(expr)                                                       \
  do {                                                                                      \
    if (absl::Status fs_status_ =                                                           \
            ::flashserve::model::cuda::cuda_status((expr), __FILE__, __LINE__, #expr);      \
        !fs_status_.ok())                                                                   \
      return fs_status_;                                                                    \
  } while (0)

#define FS_CUBLAS_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                      \
    if (absl::Status fs_status_ =                                                           \
            ::flashserve::model::cuda::cublas_status((expr), __FILE__, __LINE__, #expr);    \
        !fs_status_.ok())                                                                   \
      return fs_status_;                                                                    \
  } while (0)
