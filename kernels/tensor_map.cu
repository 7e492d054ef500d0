#include "kernels/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "absl/strings/str_cat.h"

namespace flashserve::kernels {
namespace {

// cuTensorMapEncodeTiled from the driver through the runtime, looked up once.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // clear the (non-sticky) error the failed query left
      f = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace

absl::Status encode_tensor_map_2d(const TensorMap2d& t, const char* what, CUtensorMap* map) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) {
    return absl::InternalError(
        absl::StrCat(what, ": the driver has no cuTensorMapEncodeTiled (TMA tensor maps)"));
  }
  const cuuint64_t dims[2] = {t.cols, t.rows};
  const cuuint64_t strides[1] = {t.row_bytes};
  const cuuint32_t box[2] = {t.box_cols, t.box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(map, t.type, 2, const_cast<void*>(t.base), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, t.swizzle,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": cuTensorMapEncodeTiled of [", t.rows, ", ", t.cols, "] (row stride ",
        t.row_bytes, " B, box ", t.box_rows, " x ", t.box_cols, ") failed (CUresult ",
        static_cast<int>(r), ")"));
  }
  return absl::OkStatus();
}

}  // namespace flashserve::kernels
