// The CUDA half of kernels/device.h: asks the runtime for devices. Built only with nvcc.
#include <cuda_runtime.h>

#include "kernels/device.h"

namespace flashserve::kernels {

int cuda_device_count() {
  int count = 0;
  // cudaErrorNoDevice / cudaErrorInsufficientDriver mean "no GPU here", not a failure.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  return count;
}

}  // namespace flashserve::kernels
