#pragma once
// What every kernel family's .cu needs besides its own device code: error checks
// (kernels/cuda_check.h), the element types behind DType and the dispatch over them, bf16
// rounding on both sides, and the dynamic shared-memory limit. Launches of decode-path
// kernels go through kernels/dependent_launch.cuh. Device code: host code (model/, server/)
// includes kernels/cuda_check.h and base/bf16.h instead.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/bf16.h"
#include "kernels/cuda_check.h"
#include "kernels/dtype.h"

namespace flashserve::kernels::device {

inline constexpr float kNegInf = -__builtin_huge_valf();

// Element type T <-> fp32 (round to nearest even), and two fp32 values packed into one
// 32-bit register of T pairs.
template <typename T>
struct DTypeTraits;
template <>
struct DTypeTraits<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    Pair v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
};
template <>
struct DTypeTraits<__half> {
  using Pair = __half2;
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    Pair v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
};

// x rounded to the nearest bf16, as an fp32 value: the device twin of
// flashserve::round_to_bf16 (base/bf16.h), which the CPU references use.
__device__ __forceinline__ float round_to_bf16(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) (returning absl::Status) with T the element type of `dtype`; a value
// outside the enum is an InvalidArgument naming `op` (the launcher) and the value.
template <typename F>
absl::Status dispatch_dtype(const char* op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBf16: return f(TypeTag<__nv_bfloat16>{});
    case DType::kFp16: return f(TypeTag<__half>{});
  }
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": unsupported dtype ", static_cast<int>(dtype),
                   " (supported: bf16, fp16)"));
}

// Dynamic shared memory above 48 KiB needs the kernel's limit raised first. The attribute
// belongs to the kernel function on the current device, not to a stream: setting it does not
// synchronise and is legal during graph capture, but it is host work on every call.
//   set_smem_limit: at every launch, for kernels whose size depends on the call (gemv's k)
//     or that launch only while a decode graph is captured (replays skip the host code);
//   set_smem_limit_once<Tag>: once per process and Tag, for a fixed size on a path that
//     launches every step outside graphs (prefill). A process drives one device
//     (model/cuda/cuda_runner.cc), so once per process is once per device.
template <typename Kernel>
absl::Status set_smem_limit(Kernel kernel, int bytes) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  return absl::OkStatus();
}
template <typename Tag, typename Kernel>
absl::Status set_smem_limit_once(Kernel kernel, int bytes) {
  static const absl::Status status = set_smem_limit(kernel, bytes);  // one static per Tag
  return status;
}

}  // namespace flashserve::kernels::device
