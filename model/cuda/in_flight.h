#pragma once
// The CUDA runner's steps in flight (model/runner.h, overlapped steps: launch(N + 1) before
// wait() returns N's tokens) and the rule that says when a step may start while the one
// before it still runs. Host bookkeeping only: the runner owns the stream and the events.
#include <cstdint>
#include <deque>
#include <vector>

#include "kernels/sampling.h"
#include "model/cuda/step_timer.h"
#include "model/runner.h"
#include "model/sampling.h"

namespace flashserve::model::cuda {

// One launched step whose tokens wait() has not returned yet.
struct InFlightStep {
  int slot = 0;  // its staging buffer (DeviceWorkspace::staging) and completion event
  // Its results in that staging buffer, [specs.size()], valid once the event completed
  // (null when nothing was sampled).
  const kernels::SampleResult* results = nullptr;
  std::vector<kernels::SampleSpec> specs;  // a copy of the batch's sample_specs
  TimerMode timer = TimerMode::kOff;
  ForwardStats* stats = nullptr;  // the caller's, may be null
  // Finished early (the runner synchronised with it and read its results to launch the next
  // step alone): `sampled` holds its tokens, and wait() returns them without synchronising.
  bool finished = false;
  std::vector<SampledToken> sampled;
};

// At most kMaxSteps steps, oldest first; each launched step takes the other staging slot than
// the step before it, so the two steps in flight never share one.
class InFlightSteps {
 public:
  static constexpr int kMaxSteps = 2;

  bool empty() const { return steps_.empty(); }
  bool full() const { return static_cast<int>(steps_.size()) == kMaxSteps; }
  // The slot of the next launched step.
  int next_slot() const { return static_cast<int>(num_launched_ % kMaxSteps); }
  // Samples of the last launched step (0 before the first): the sample indices the next
  // step's previous_samples may name. Kept after its wait().
  int num_previous_samples() const { return num_previous_samples_; }
  // REQUIRES: !empty().
  InFlightStep& oldest() { return steps_.front(); }
  // The step the device may still be computing: the newest, unless none is in flight or it
  // was finished early; null otherwise.
  InFlightStep* running();
  // Records a launched step (its slot: next_slot()). REQUIRES: !full().
  void push(InFlightStep step);
  // Removes the oldest step and returns it. REQUIRES: !empty().
  InFlightStep pop();

 private:
  std::deque<InFlightStep> steps_;
  uint64_t num_launched_ = 0;
  int num_previous_samples_ = 0;
};

// What decides whether a step may be enqueued while the step before it still runs.
struct OverlapQuery {
  bool running_timed = false;   // the running step records timer events (TimerMode != kOff)
  bool timed = false;           // this step would
  bool captures_graph = false;  // a decode step whose graph is not captured yet (its first use
                                // runs eagerly, its second is captured: DecodeGraphs)
  bool grows_workspace = false;  // its upload reallocates a buffer (upload_grows_workspace)
};

// True for an untimed step that neither captures a graph nor grows the workspace, beside an
// untimed running step: a graph replay, and the eager steps (prefill and mixed batches, decode
// with graphs off). Otherwise the runner finishes the running step first: the StepTimer has
// one set of events (a timed step must be the only one between its begin() and collect()), a
// capture must not meet other work on its stream, and a reallocation would free a buffer
// under the running step (model/cuda/llama_forward.h, DeviceWorkspace). What an eager step
// does besides launching kernels is safe beside a running one: kernels' first-use attributes
// and cuBLASLt's plans are host calls; its side-stream work forks from the stream after the
// running step (fork events recorded on the stream; a wait binds the record it sees); the
// workspace, the gemm scratch and the metadata block it shares with the running step are
// written in stream order, after that step.
bool may_overlap(const OverlapQuery& q);

}  // namespace flashserve::model::cuda
