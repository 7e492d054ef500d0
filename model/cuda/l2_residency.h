#pragma once
// The head of the native GEMMs' scratch (DeviceWorkspace::gemm_scratch: a layer's grouped bf16
// copies, model/cuda/dequant_group.h, then the quantized GEMM's split-k partial sums) kept in
// the L2: an access-policy window over it, on both streams and on every kernel node of a
// captured decode graph, with that much of the L2 set aside for persisting lines.
//
// Why: both are written every layer and read once soon after, but in between the layer's
// attention streams its KV blocks through the 50 MB L2 (256 sequences x 192 tokens x 2 KB a
// token and layer: ~100 MB on the 1B), so a 21 MB grouped copy goes out to HBM and comes back,
// and partial sums written back when evicted cost HBM writes the bf16 path does not make.
// Persisting lines are evicted only by other persisting lines: each layer's copies and
// partials overwrite the previous ones inside the L2.
#include <cstddef>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace flashserve::model::cuda {

struct L2Window {
  void* base = nullptr;
  size_t bytes = 0;       // 0: no window
  float hit_ratio = 0;    // fraction of the window's lines that persist
  size_t set_aside = 0;   // bytes of L2 set aside for persisting lines
};

// The window over the first `bytes` at `base`, at most the device's largest window and its
// largest persisting size, all of it persisting. A zero window when the device has no L2
// residency control or there is nothing to keep.
L2Window plan_l2_window(void* base, size_t bytes, int device);

// Sets the device's persisting L2 size to w.set_aside and the window on each stream
// (kernels launched afterwards, captured ones included, carry it). Nothing for a zero window.
absl::Status apply_l2_window(const L2Window& w, cudaStream_t stream, cudaStream_t side_stream);

// The window on every kernel node of a captured graph (capture copies a stream's window into
// its nodes; this makes it hold whatever stream a node was captured from).
absl::Status apply_l2_window(const L2Window& w, cudaGraph_t graph);

// After the runner's streams are done: the persisting lines demoted to normal ones and the
// set-aside returned (another runner in the process starts from a plain L2). Best effort.
void release_l2_window(const L2Window& w);

}  // namespace flashserve::model::cuda
