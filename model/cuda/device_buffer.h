#pragma once
// Owning handles of device and pinned host memory (move-only; freed on destruction).
#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "kernels/cuda_check.h"

typedef struct CUstream_st* cudaStream_t;

namespace flashserve::model::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = o.bytes_;
    }
    return *this;
  }
  // Frees what it held and allocates `bytes` (uninitialised). ResourceExhausted naming the
  // size when the device is out of memory.
  absl::Status allocate(size_t bytes);
  // allocate() unless it already holds at least `bytes`.
  absl::Status reserve(size_t bytes) { return bytes <= bytes_ ? absl::OkStatus() : allocate(bytes); }
  // reserve() that keeps the contents: a larger buffer gets the old bytes, copied on
  // `stream`, which is synchronised before the old buffer is freed (a growth costs a host
  // synchronisation). REQUIRES: no work on another stream uses the buffer.
  absl::Status reserve_keeping(size_t bytes, cudaStream_t stream);
  void reset();
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { reset(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  absl::Status reserve(size_t bytes);
  void reset();
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace flashserve::model::cuda
