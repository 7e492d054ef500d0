#include "model/runner.h"

namespace flashserve::model {

// A runner that does not overlap steps: the engine never calls these (overlaps() is false).
absl::Status ModelRunner::launch(const ForwardBatch& /*batch*/, ForwardStats* /*stats*/) {
  return absl::UnimplementedError("this model runner does not overlap steps (launch)");
}

absl::Status ModelRunner::wait(std::vector<SampledToken>* /*sampled*/) {
  return absl::UnimplementedError("this model runner does not overlap steps (wait)");
}

}  // namespace flashserve::model
