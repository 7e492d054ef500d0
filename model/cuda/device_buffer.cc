#include "model/cuda/device_buffer.h"

#include <cuda_runtime_api.h>

#include "base/status_macros.h"

namespace flashserve::model::cuda {

absl::Status DeviceBuffer::allocate(size_t bytes) {
  reset();
  if (bytes == 0) return absl::OkStatus();
  const cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err != cudaSuccess) {
    ptr_ = nullptr;
    cudaGetLastError();  // clear the error so that later calls start clean
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return absl::ResourceExhaustedError(absl::StrCat(
        "cuda: cannot allocate ", bytes, " bytes of device memory (", free, " of ", total,
        " bytes free): ", cudaGetErrorString(err)));
  }
  bytes_ = bytes;
  return absl::OkStatus();
}

absl::Status DeviceBuffer::reserve_keeping(size_t bytes, cudaStream_t stream) {
  if (bytes <= bytes_) return absl::OkStatus();
  DeviceBuffer grown;
  RETURN_IF_ERROR(grown.allocate(bytes));
  if (bytes_ > 0) {
    CUDA_CHECK(cudaMemcpyAsync(grown.ptr_, ptr_, bytes_, cudaMemcpyDeviceToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  *this = std::move(grown);
  return absl::OkStatus();
}

void DeviceBuffer::reset() {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

absl::Status PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return absl::OkStatus();
  reset();
  CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
  bytes_ = bytes;
  return absl::OkStatus();
}

void PinnedBuffer::reset() {
  if (ptr_ != nullptr) cudaFreeHost(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace flashserve::model::cuda
