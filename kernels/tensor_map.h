#pragma once
// TMA tensor maps (CUtensorMap) of 2-D row-major arrays in global memory, for the Hopper
// kernels that load tiles with cp.async.bulk.tensor (the attention prefill's K/V cache,
// kernels/attention/attention_prefill.cu; the quantized GEMM's x and weight bytes,
// kernels/quant/quant_gemm_sm90.cu). Encoded on the host by the driver's
// cuTensorMapEncodeTiled, reached through the runtime's driver entry point, so nothing links
// against libcuda. A map is a 128-byte value passed to the kernel as a __grid_constant__
// parameter; it holds the base pointer, so it is encoded per launch (host work, no device call).
#include <cuda.h>

#include <cstdint>

#include "absl/status/status.h"

namespace flashserve::kernels {

struct TensorMap2d {
  const void* base = nullptr;  // 16-byte aligned
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  uint64_t rows = 0;       // the array's bounds, in elements: boxes past them read zeros
  uint64_t cols = 0;
  uint64_t row_bytes = 0;  // distance between rows, a multiple of 16
  uint32_t box_rows = 0;   // one load's box, in elements (box_cols x element size <= the
  uint32_t box_cols = 0;   // swizzle's span when swizzled)
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
};

// Encodes `t` into *map (L2 promotion 256 B, no interleave, element strides 1). Errors:
// InternalError when the driver has no cuTensorMapEncodeTiled; InvalidArgument naming `what`
// and the bounds when the driver rejects the description (alignment, box, strides).
absl::Status encode_tensor_map_2d(const TensorMap2d& t, const char* what, CUtensorMap* map);

}  // namespace flashserve::kernels
