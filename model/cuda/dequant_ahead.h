#pragma once
// The deq+blas path of gemm_linear (model/cuda/llama_forward.cc: steps of more than
// kernels::quant_gemm_max_tokens() tokens multiply a native matrix by dequantizing it into
// the workspace's gemm_scratch and running cuBLASLt on the copy) with the dequantize of the
// step's next native matrix hidden under the current matrix's GEMM: it runs on a second
// stream, forked from the main stream after the GEMM that last read its region and joined
// back before the GEMM that reads it. Fork and join are event record / wait pairs, which a
// CUDA graph capture turns into graph edges (decode steps of more than
// quant_gemm_max_tokens() sequences are captured: model/cuda/decode_graph.h).
//
// Placement in gemm_scratch: consecutive matrices at opposite ends (the bottom from offset
// 0, the top ending at the buffer's end, 256-byte aligned), so that the copy being read and
// the copy being written never overlap; DeviceWeights::max_dequant_bytes covers every
// consecutive pair (dequant_pair_bytes). Where a pair does not fit, or nothing runs ahead
// (the stream not created, a matrix outside the step's order such as the LM head), the
// dequantize runs on the main stream, as without this class.
// Not thread-safe: one per workspace, used by the engine thread.
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/cuda/device_buffer.h"
#include "model/cuda/device_weights.h"

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

namespace flashserve::model::cuda {

// One gemm_linear's native weight: w, or [w; w2] dequantized one after the other.
struct DequantSlot {
  const DeviceMatrix* w = nullptr;
  const DeviceMatrix* w2 = nullptr;  // null when the GEMM has one part
  int64_t bytes() const;             // of the bf16 copy
  bool operator==(const DequantSlot&) const = default;
};

// The slot of gemm_linear(w, w2): w2 dropped when null or empty.
DequantSlot dequant_slot(const DeviceMatrix& w, const DeviceMatrix* w2);

// The native slots of layers [0, num_layers) in the order a step multiplies them: per layer
// QKV (wqkv, wv), O, gate/up, down.
std::vector<DequantSlot> dequant_order(const DeviceWeights& weights, int num_layers);

// Bytes gemm_scratch needs so that every two consecutive slots of dequant_order (over all
// layers) fit at opposite ends.
int64_t dequant_pair_bytes(const DeviceWeights& weights);

class DequantAhead {
 public:
  DequantAhead() = default;
  ~DequantAhead();
  DequantAhead(const DequantAhead&) = delete;
  DequantAhead& operator=(const DequantAhead&) = delete;

  // Creates the side stream and its two events; call outside any capture (at reserve time).
  // Without it every dequantize runs on the main stream.
  absl::Status init();

  // A step starts; `order` lists the slots its deq+blas GEMMs will read, in order (empty:
  // none run ahead). Joins whatever a failed earlier step left running.
  absl::Status begin_step(std::vector<DequantSlot> order, cudaStream_t main);

  // The bf16 copy of slot s in `scratch`, complete once the main stream reaches its next
  // operation (joined from the side stream, or dequantized on `main`); then, when s is in
  // the order and the next slot fits, that slot's dequantize forked onto the side stream.
  absl::StatusOr<void*> acquire(const DequantSlot& s, const DeviceBuffer& scratch,
                                cudaStream_t main);

  // Joins a dequantize running ahead into `main`: before any other use of the scratch and at
  // the end of a step (a capture must end with every forked stream joined).
  absl::Status join(cudaStream_t main);

 private:
  absl::Status fork_next(const DequantSlot& s, char* out, const DeviceBuffer& scratch,
                         cudaStream_t main);

  cudaStream_t stream_ = nullptr;
  cudaEvent_t fork_ = nullptr, done_ = nullptr;
  std::vector<DequantSlot> order_;
  size_t next_ = 0;       // index in order_ of the slot after the last acquired one
  bool pending_ = false;  // order_[next_] is being dequantized on stream_ into pending_out_
  char* pending_out_ = nullptr;
};

}  // namespace flashserve::model::cuda
