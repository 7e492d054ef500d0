// KernelTrace in a build without CUDA: there is nothing to trace.
#include "bench/serving/kernel_trace.h"

namespace flashserve::bench {

absl::StatusOr<std::unique_ptr<KernelTrace>> KernelTrace::create() {
  return absl::UnimplementedError("kernel trace: this build has no CUDA (CUPTI) support");
}

void push_range(const char*) {}
void pop_range() {}

}  // namespace flashserve::bench
