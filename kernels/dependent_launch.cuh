#pragma once
// Programmatic dependent launch (PDL, sm_90+) for the small kernels of a decode step.
//
// A decode step of a small model is ~200 kernels of 1-5 us each, back to back on one
// stream; between two of them the GPU drains the first grid, then launches and rasterises
// the second, ~1-2 us of idle SMs per boundary. With PDL the next kernel is launched while
// the previous one still runs, and waits on the device (griddepcontrol.wait) for the
// previous grid to complete and flush its writes before touching memory.
//
// The contract, for every kernel launched through launch_dependent():
//   - it calls wait_for_prior_grid() before its first global-memory access, reads and
//     writes alike (a write could race with the previous kernel's reads otherwise). One
//     exception: L2 prefetches or register loads of memory that no kernel of the step
//     writes (the weights) may come first, so that the weights stream in while the
//     previous kernel runs (kernels/gemv.cu, kernels/quant/quant_gemv.cuh);
//   - it may call allow_next_grid() at any point: from then on the next kernel may be
//     scheduled (it still waits for this grid's completion before touching memory).
// Kernels of other libraries (cuBLASLt) are launched normally; a PDL launch after one of
// them simply starts when it ends. Below sm_90 both device calls compile to nothing and
// the launch attribute is not set, so the launches serialise as usual.
#include <cuda_runtime.h>

#include <utility>

namespace flashserve::kernels::device {

__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether the current device has PDL (compute capability 9.0+), read once per process.
bool dependent_launch_supported();

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialisation
// where supported. Returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attribute;
  config.numAttrs = dependent_launch_supported() ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

}  // namespace flashserve::kernels::device
