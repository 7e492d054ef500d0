#pragma once
// cuBLASLt statuses as absl::Status, the cuBLAS twin of CUDA_CHECK (kernels/cuda_check.h,
// which the CUDA runtime calls of model/cuda/ use):
//   CUBLAS_CHECK(cublasLtMatmul(...));
//       in a function returning absl::Status or absl::StatusOr<T>: a failed call returns
//       InternalError naming the file, the line, the call and the status.
#include <cublasLt.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace flashserve::model::cuda {

inline absl::Status cublas_error_status(cublasStatus_t st, const char* file, int line,
                                        const char* call) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(file, ":", line, ": ", call, ": cuBLAS status ",
                                          static_cast<int>(st)));
}

}  // namespace flashserve::model::cuda

#define CUBLAS_CHECK(expr)                                                                   \
  do {                                                                                       \
    if (absl::Status cublas_check_s_ = ::flashserve::model::cuda::cublas_error_status(       \
            (expr), __FILE__, __LINE__, #expr);                                              \
        !cublas_check_s_.ok())                                                               \
      return cublas_check_s_;                                                                \
  } while (0)
