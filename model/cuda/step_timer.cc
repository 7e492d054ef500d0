#include "model/cuda/step_timer.h"

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.h"

namespace flashserve::model::cuda {

StepTimer::~StepTimer() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
}

absl::Status StepTimer::begin(cudaStream_t stream, TimerMode mode) {
  stream_ = stream;
  mode_ = mode;
  num_recorded_ = 0;
  parts_.clear();
  if (mode == TimerMode::kOff) return absl::OkStatus();
  return record(StepPart::kOther);  // the step's start; its own part is never read
}

absl::Status StepTimer::mark(StepPart part, bool always) {
  if (mode_ == TimerMode::kOff) return absl::OkStatus();
  const bool attention = part == StepPart::kAttentionPrefill || part == StepPart::kAttentionDecode;
  if (mode_ == TimerMode::kAttention && !always && !attention) return absl::OkStatus();
  return record(part);
}

absl::Status StepTimer::record(StepPart part) {
  if (num_recorded_ == events_.size()) {
    cudaEvent_t e;
    CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
  }
  CUDA_CHECK(cudaEventRecord(events_[num_recorded_], stream_));
  parts_.push_back(part);
  ++num_recorded_;
  return absl::OkStatus();
}

absl::StatusOr<StepTimes> StepTimer::collect() {
  StepTimes t;
  const bool profile = mode_ == TimerMode::kFull;
  t.profiled = profile;
  for (size_t i = 1; i < num_recorded_; ++i) {
    const StepPart part = parts_[i];
    const bool attention =
        part == StepPart::kAttentionPrefill || part == StepPart::kAttentionDecode;
    // Outside profiled steps the stretch before an attention start spans untimed work.
    if (!profile && !attention) continue;
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
    const double s = ms * 1e-3;
    switch (part) {
      case StepPart::kAttentionPrefill: t.attention_prefill += s; break;
      case StepPart::kAttentionDecode: t.attention_decode += s; break;
      case StepPart::kGemm: t.gemm += s; break;
      case StepPart::kOther: t.other += s; break;
    }
  }
  return t;
}

}  // namespace flashserve::model::cuda
