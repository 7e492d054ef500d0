// The CUDA half of kernels/device.h: asks the runtime for devices. Built only with nvcc.
#include <cuda_runtime.h>

#include <vector>

#include "kernels/dependent_launch.cuh"
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

int compute_capability(int device) {
  static const std::vector<int> capabilities = [] {
    std::vector<int> cc(cuda_device_count());
    for (int d = 0; d < static_cast<int>(cc.size()); ++d) {
      int major = 0, minor = 0;
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
      cc[d] = major * 10 + minor;
    }
    return cc;
  }();
  return device >= 0 && device < static_cast<int>(capabilities.size()) ? capabilities[device] : 0;
}

}  // namespace flashserve::kernels

namespace flashserve::kernels::device {

bool dependent_launch_supported() {
  static const bool supported = [] {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return supported;
}

}  // namespace flashserve::kernels::device
