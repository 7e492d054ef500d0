#include "model/cuda/dequant_ahead.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <utility>

#include "base/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/quant/quant_gemv.h"

namespace flashserve::model::cuda {
namespace {

constexpr int64_t kTopAlign = 256;

// Offset of a copy of `bytes` placed at the top of a buffer of `size` bytes.
int64_t top_offset(int64_t size, int64_t bytes) { return (size - bytes) / kTopAlign * kTopAlign; }

int64_t matrix_bytes(const DeviceMatrix* m) { return m == nullptr ? 0 : m->rows * m->k * 2; }

// The bf16 copy of s's parts, one after the other, at `out` on `stream`.
absl::Status dequantize_slot(const DequantSlot& s, void* out, cudaStream_t stream) {
  int64_t row = 0;
  for (const DeviceMatrix* part : {s.w, s.w2}) {
    if (part == nullptr) continue;
    kernels::DequantizeParams d;
    d.format = part->format;
    d.w = part->get();
    d.num_rows = part->rows;
    d.k = part->k;
    d.row_begin = 0;
    d.row_end = part->rows;
    d.out = static_cast<uint16_t*>(out) + row * part->k;
    RETURN_IF_ERROR(kernels::dequantize_bf16(d, stream));
    row += part->rows;
  }
  return absl::OkStatus();
}

}  // namespace

int64_t DequantSlot::bytes() const { return matrix_bytes(w) + matrix_bytes(w2); }

DequantSlot dequant_slot(const DeviceMatrix& w, const DeviceMatrix* w2) {
  return {&w, w2 != nullptr && !w2->empty() ? w2 : nullptr};
}

std::vector<DequantSlot> dequant_order(const DeviceWeights& weights, int num_layers) {
  std::vector<DequantSlot> order;
  for (int i = 0; i < num_layers; ++i) {
    const DeviceLayer& l = weights.layers[i];
    for (const DequantSlot s : {dequant_slot(l.wqkv, &l.wv), dequant_slot(l.wo, nullptr),
                                dequant_slot(l.w_gate_up, nullptr), dequant_slot(l.w_down, nullptr)}) {
      if (s.w->native()) order.push_back(s);
    }
  }
  return order;
}

int64_t dequant_pair_bytes(const DeviceWeights& weights) {
  const std::vector<DequantSlot> order =
      dequant_order(weights, static_cast<int>(weights.layers.size()));
  int64_t bytes = 0;
  for (size_t i = 0; i + 1 < order.size(); ++i) {
    bytes = std::max(bytes, order[i].bytes() + order[i + 1].bytes() + kTopAlign);
  }
  return bytes;
}

DequantAhead::~DequantAhead() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status DequantAhead::init() {
  if (stream_ != nullptr) return absl::OkStatus();
  CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  return absl::OkStatus();
}

absl::Status DequantAhead::begin_step(std::vector<DequantSlot> order, cudaStream_t main) {
  RETURN_IF_ERROR(join(main));
  order_ = stream_ != nullptr ? std::move(order) : std::vector<DequantSlot>{};
  next_ = 0;
  return absl::OkStatus();
}

absl::Status DequantAhead::join(cudaStream_t main) {
  if (!pending_) return absl::OkStatus();
  pending_ = false;
  CUDA_CHECK(cudaStreamWaitEvent(main, done_, 0));
  return absl::OkStatus();
}

absl::StatusOr<void*> DequantAhead::acquire(const DequantSlot& s, const DeviceBuffer& scratch,
                                            cudaStream_t main) {
  char* out = scratch.get<char>();
  size_t at = order_.size();  // s's index in the order, if there
  if (pending_ && order_[next_] == s) {
    out = pending_out_;
    at = next_;
    RETURN_IF_ERROR(join(main));
  } else {
    RETURN_IF_ERROR(join(main));
    RETURN_IF_ERROR(dequantize_slot(s, out, main));
    at = static_cast<size_t>(std::find(order_.begin(), order_.end(), s) - order_.begin());
  }
  next_ = at + 1;
  if (next_ < order_.size()) RETURN_IF_ERROR(fork_next(s, out, scratch, main));
  return out;
}

// Forks the dequantize of order_[next_] onto the side stream, at the other end of the
// scratch from s's copy at `out`, if both fit. Recorded on `main` after the GEMM before s's
// (the last reader of that region, enqueued by the previous gemm_linear) and before s's own.
absl::Status DequantAhead::fork_next(const DequantSlot& s, char* out, const DeviceBuffer& scratch,
                                     cudaStream_t main) {
  const int64_t size = static_cast<int64_t>(scratch.bytes());
  char* base = scratch.get<char>();
  const DequantSlot& next = order_[next_];
  const bool at_bottom = out == base;
  const bool fits = at_bottom ? s.bytes() <= top_offset(size, next.bytes())
                              : next.bytes() <= top_offset(size, s.bytes());
  if (!fits) return absl::OkStatus();
  char* next_out = at_bottom ? base + top_offset(size, next.bytes()) : base;
  CUDA_CHECK(cudaEventRecord(fork_, main));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, fork_, 0));
  RETURN_IF_ERROR(dequantize_slot(next, next_out, stream_));
  CUDA_CHECK(cudaEventRecord(done_, stream_));
  pending_ = true;
  pending_out_ = next_out;
  return absl::OkStatus();
}

}  // namespace flashserve::model::cuda
