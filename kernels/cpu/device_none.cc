// Without CUDA there is no device to count; with CUDA, kernels/device_info.cu provides it.
#ifndef FLASHSERVE_HAVE_CUDA
#include "kernels/device.h"

namespace flashserve::kernels {
int cuda_device_count() { return 0; }
int compute_capability(int) { return 0; }
int multiprocessor_count(int) { return 0; }
}  // namespace flashserve::kernels
#endif
