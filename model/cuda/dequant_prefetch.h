#pragma once
// Steps with prefills past the quantized GEMM's crossover (model/cuda/native_gemm_path.h):
// every native matrix that is not in a layer's group (model/cuda/dequant_group.h) is
// dequantized whole into a bf16 copy for cuBLASLt, ~4.7 ms of the 8B's 2,048-token step
// (~53 ms) when each runs on the stream right before its GEMM. Here they run ahead on
// ForwardContext::side_stream instead, in the pass's order of GEMMs: matrix i + 2's copy is
// written into the slot matrix i's GEMM read, as soon as that GEMM is enqueued, so it overlaps
// the memory-bound kernels between (RoPE, attention, RMSNorm, SwiGLU) and the next GEMM.
// Two slots, past the group buffers of gemm_scratch: even entries in slot 0, odd in slot 1
// (sized for the largest of each parity). A pass calls begin, then gemm_linear asks
// prefetched_copy before a deq+blas GEMM and calls prefetch_gemm_done after it; end after the
// last layer. Decode-only steps never use it (their group prefetch uses the same events).
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/cuda/device_weights.h"
#include "model/cuda/llama_forward.h"

namespace flashserve::model::cuda {

// The matrices of a pass over `num_layers` layers at m tokens that take deq+blas one by one
// (on a device whose quantized GEMM wins up to max_tokens), in the order of their GEMMs: per
// layer [wq; wk] (+ wv), wo, w_gate_up, w_down where they do. A pure function of the shapes.
struct DequantPrefetchPlan {
  struct Entry {
    const DeviceMatrix* a = nullptr;
    const DeviceMatrix* b = nullptr;  // wv beside [wq; wk], or null
    int64_t elements = 0;             // both parts' rows x k
  };
  std::vector<Entry> entries;
  int64_t slot_elements[2] = {0, 0};  // the largest even / odd entry, rounded up to 128
};
DequantPrefetchPlan plan_dequant_prefetch(const std::vector<DeviceLayer>& layers,
                                          int num_layers, int m, int max_tokens);

// Elements of gemm_scratch the two slots take for a model's layers (both slots of the plan
// at any step past max_tokens): DeviceWeights::max_dequant_bytes counts them past the groups.
int64_t dequant_prefetch_elements(const std::vector<DeviceLayer>& layers, int max_tokens);

// A pass of m tokens: in a step with prefills, plans it and forks the first two copies.
absl::Status begin_dequant_prefetch(const ForwardContext& ctx, int num_layers, int m,
                                    bool decodes_only);

// Before the deq+blas GEMM of w: the stream waits for w's copy and gets it, or null when the
// pass prefetches nothing. An Internal error when w is not the plan's next matrix (the plan
// and gemm_linear disagree: a bug).
absl::StatusOr<const void*> prefetched_copy(const ForwardContext& ctx, const DeviceMatrix& w);

// After that GEMM is enqueued: the copy of the matrix two entries on is forked into its slot.
absl::Status prefetch_gemm_done(const ForwardContext& ctx);

// After the last layer, and after a pass that stopped on an error: the state cleared, and
// the stream made to wait for any copy still in flight (after a whole pass there is none:
// every fork was waited for by its GEMM). An Internal error when not every planned GEMM ran.
absl::Status end_dequant_prefetch(const ForwardContext& ctx);

}  // namespace flashserve::model::cuda
