#pragma once
// The device activities of a stretch of steps, from CUPTI (the CUDA toolkit's tracing
// library): every kernel (graph nodes included) and copy with its device start and end
// timestamps, and the host times at which cudaStreamSynchronize was entered. No event is
// recorded in the runner's stream and nothing in the runner changes: the benchmark reads
// the steps as the server runs them. Tracing is off outside start() / stop(); while on,
// CUPTI adds a little per-kernel overhead, so untimed and traced steps are separate runs.
//
// Built without CUDA (kernel_trace_none.cc), create() answers Unimplemented.
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/serving/step_breakdown.h"

namespace flashserve::bench {

class KernelTrace {
 public:
  // One per process (CUPTI's callbacks are process-wide). Unimplemented without CUDA,
  // Internal naming the CUPTI error when CUPTI cannot be initialised.
  static absl::StatusOr<std::unique_ptr<KernelTrace>> create();
  virtual ~KernelTrace() = default;

  // CUPTI's clock (ns), the one the activities' timestamps use.
  virtual uint64_t now_ns() = 0;
  virtual absl::Status start() = 0;
  // Stops tracing and returns what was traced since start(): the activities and the host
  // timestamps at which cudaStreamSynchronize was entered, both in now_ns()'s clock.
  virtual absl::Status stop(std::vector<GpuActivity>* activities,
                            std::vector<uint64_t>* sync_enter_ns) = 0;
};

// An NVTX range around the steps of one batch size ("decode N=64"), so that a profiler
// attached to the benchmark (ncu --nvtx --nvtx-include "decode N=64/") sees only those
// steps. Free when no tool is attached; nothing without CUDA.
void push_range(const char* name);
void pop_range();

}  // namespace flashserve::bench
