#pragma once
// The 16-bit floating-point types our CUDA kernels read and write (fp32 accumulation
// everywhere). Host-only header: no CUDA types.

namespace flashserve::kernels {

enum class DType { kBf16, kFp16 };

// Bytes of one element.
constexpr int dtype_bytes(DType) { return 2; }

}  // namespace flashserve::kernels
