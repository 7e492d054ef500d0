#pragma once
// GPU time of one forward pass by part, from CUDA events recorded on the step's stream and
// read after the step's own final synchronisation (no extra sync). Attention launches are
// timed in every step (the kernel-latency and bandwidth metrics); the full breakdown
// (attention / GEMM / other) is recorded in profiled steps only, to keep ~10 event records
// per layer off the hot path of the others.
//
// Usage per step: begin(stream, mode); then after each stretch of enqueued work
// mark(part) says what the work since the previous mark was; attention launches are
// bracketed by mark(part_before) and mark(kAttention*), which record unless the mode is
// kOff. After the stream synchronised, collect(). kOff is for steps that are not timed:
// metrics off, and work captured into a CUDA graph (an event record would be captured too).
#include <vector>

#include "absl/status/statusor.h"

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

namespace flashserve::model::cuda {

enum class StepPart { kAttentionPrefill, kAttentionDecode, kGemm, kOther };
enum class TimerMode {
  kOff,        // no events
  kAttention,  // the attention launches only (the per-step kernel metrics)
  kFull,       // every part (the attention / GEMM / other breakdown)
};

struct StepTimes {
  double attention_prefill = 0;  // seconds, unless the mode was kOff
  double attention_decode = 0;
  bool profiled = false;  // the fields below are measured only in profiled steps
  double gemm = 0;
  double other = 0;
};

class StepTimer {
 public:
  StepTimer() = default;
  ~StepTimer();
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  absl::Status begin(cudaStream_t stream, TimerMode mode);
  // The work enqueued since the previous mark was `part`. Records an event in kFull steps;
  // in kAttention steps only around attention (`always` for the mark just before an
  // attention launch, and every attention part); never in kOff steps.
  absl::Status mark(StepPart part, bool always = false);
  // REQUIRES: the stream has synchronised past the last mark.
  absl::StatusOr<StepTimes> collect();

 private:
  absl::Status record(StepPart part);

  cudaStream_t stream_ = nullptr;
  TimerMode mode_ = TimerMode::kOff;
  std::vector<cudaEvent_t> events_;  // pool, grown on demand
  std::vector<StepPart> parts_;      // parts_[i]: the work between events i-1 and i
  size_t num_recorded_ = 0;
};

}  // namespace flashserve::model::cuda
