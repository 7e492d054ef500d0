#pragma once
// Which compute device this process can use. Host-only API: no CUDA types.

namespace flashserve::kernels {

// Number of CUDA devices usable by this process; 0 when built without CUDA or when no
// driver/device is present (the call never fails, a missing driver is simply "no GPU").
int cuda_device_count();

}  // namespace flashserve::kernels
