#pragma once
// Which compute device this process can use. Host-only API: no CUDA types.

namespace flashserve::kernels {

// Number of CUDA devices usable by this process; 0 when built without CUDA or when no
// driver/device is present (the call never fails, a missing driver is simply "no GPU").
int cuda_device_count();

// Compute capability of CUDA device `device` as major * 10 + minor (90 for Hopper), queried
// once per process for every visible device; 0 for a device that does not exist or without
// CUDA.
int compute_capability(int device);

// Number of streaming multiprocessors of CUDA device `device`, queried with the compute
// capability (once per process); 0 for a device that does not exist or without CUDA.
int multiprocessor_count(int device);

}  // namespace flashserve::kernels
