// The CUDA runner's steps in flight (model/cuda/in_flight.h): the order, the staging slots
// and the previous step's sample count that the protocol of model/runner.h rests on, and the
// rule that lets a step start beside a running one. Needs no GPU.
#include "model/cuda/in_flight.h"

#include <gtest/gtest.h>

namespace flashserve::model::cuda {
namespace {

InFlightStep step_of(int slot, int num_samples) {
  InFlightStep s;
  s.slot = slot;
  s.specs.resize(num_samples);
  return s;
}

TEST(InFlightStepsTest, TwoStepsInLaunchOrderOnAlternatingSlots) {
  InFlightSteps steps;
  EXPECT_TRUE(steps.empty());
  EXPECT_EQ(steps.running(), nullptr);
  EXPECT_EQ(steps.num_previous_samples(), 0);  // nothing launched: no entry >= 0 is valid
  EXPECT_EQ(steps.next_slot(), 0);
  steps.push(step_of(steps.next_slot(), 3));
  EXPECT_EQ(steps.next_slot(), 1);
  EXPECT_EQ(steps.num_previous_samples(), 3);
  steps.push(step_of(steps.next_slot(), 5));
  EXPECT_TRUE(steps.full());
  EXPECT_EQ(steps.num_previous_samples(), 5);
  ASSERT_NE(steps.running(), nullptr);
  EXPECT_EQ(steps.running()->slot, 1);  // the newest runs; the older one is done before it
  EXPECT_EQ(steps.oldest().slot, 0);
  EXPECT_EQ(steps.pop().specs.size(), 3u);
  EXPECT_FALSE(steps.full());
  EXPECT_EQ(steps.next_slot(), 0);  // the slot of the step just returned
  EXPECT_EQ(steps.pop().specs.size(), 5u);
  EXPECT_TRUE(steps.empty());
  EXPECT_EQ(steps.num_previous_samples(), 5);  // ws.results still holds them
}

TEST(InFlightStepsTest, AFinishedStepIsNotRunning) {
  InFlightSteps steps;
  steps.push(step_of(steps.next_slot(), 1));
  steps.running()->finished = true;
  EXPECT_EQ(steps.running(), nullptr);
  EXPECT_FALSE(steps.empty());  // its tokens still wait for wait()
}

TEST(MayOverlapTest, AnUntimedStepThatCapturesNothingAndGrowsNothingBesideAnUntimedStep) {
  const OverlapQuery plain;  // a graph replay, or an eager prefill / mixed / decode step
  EXPECT_TRUE(may_overlap(plain));
  OverlapQuery q = plain;
  q.running_timed = true;
  EXPECT_FALSE(may_overlap(q)) << "one set of timer events";
  q = plain;
  q.timed = true;
  EXPECT_FALSE(may_overlap(q)) << "one set of timer events";
  q = plain;
  q.captures_graph = true;
  EXPECT_FALSE(may_overlap(q)) << "a decode shape's first (eager) and second (captured) use";
  q = plain;
  q.grows_workspace = true;
  EXPECT_FALSE(may_overlap(q)) << "a reallocation would free the running step's buffers";
}

}  // namespace
}  // namespace flashserve::model::cuda
