#include "model/cuda/in_flight.h"

#include <utility>

namespace flashserve::model::cuda {

void InFlightSteps::push(InFlightStep step) {
  num_previous_samples_ = static_cast<int>(step.specs.size());
  ++num_launched_;
  steps_.push_back(std::move(step));
}

InFlightStep* InFlightSteps::running() {
  if (steps_.empty() || steps_.back().finished) return nullptr;
  return &steps_.back();
}

InFlightStep InFlightSteps::pop() {
  InFlightStep step = std::move(steps_.front());
  steps_.pop_front();
  return step;
}

bool may_overlap(const OverlapQuery& q) {
  return !q.running_timed && !q.timed && !q.captures_graph && !q.grows_workspace;
}

}  // namespace flashserve::model::cuda
