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

namespace {

struct DeviceInfo {
  int compute_capability = 0;  // major * 10 + minor
  int multiprocessors = 0;
};

// Every visible device's info, asked of the runtime once per process.
const DeviceInfo* device_info(int device) {
  static const std::vector<DeviceInfo> info = [] {
    std::vector<DeviceInfo> all(cuda_device_count());
    for (int d = 0; d < static_cast<int>(all.size()); ++d) {
      int major = 0, minor = 0;
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
      cudaDeviceGetAttribute(&all[d].multiprocessors, cudaDevAttrMultiProcessorCount, d);
      all[d].compute_capability = major * 10 + minor;
    }
    return all;
  }();
  return device >= 0 && device < static_cast<int>(info.size()) ? &info[device] : nullptr;
}

}  // namespace

int compute_capability(int device) {
  const DeviceInfo* d = device_info(device);
  return d != nullptr ? d->compute_capability : 0;
}

int multiprocessor_count(int device) {
  const DeviceInfo* d = device_info(device);
  return d != nullptr ? d->multiprocessors : 0;
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
