#pragma once
// The decode-step benchmark's results (bench/serving/decode_step_bench.cc) and their
// Markdown tables. Pure formatting, tested without a GPU
// (tests/unit/bench_serving/step_breakdown_test.cc).
#include <array>
#include <map>
#include <string>
#include <vector>

#include "bench/serving/step_breakdown.h"

namespace flashserve::bench {

// Steps run under the kernel trace (bench/serving/kernel_trace.h), in order.
struct TracedSteps {
  std::vector<StepTime> steps;
  std::vector<double> wall;     // seconds: forward() called to returned
  std::vector<double> enqueue;  // seconds: forward() called to its last sync entered
};

// One batch size under one graphs mode.
struct ModeRow {
  std::vector<double> wall;  // seconds per timed (untraced) step
  TracedSteps traced;
};

struct Results {
  std::string label;  // what distinguishes it from another run's ("weights native")
  std::string title;
  std::string device;                // "cuda" or "cpu"
  std::vector<std::string> summary;  // the runners' start-up lines
  std::map<int, std::array<ModeRow, 2>> rows;  // batch size -> {graphs on, graphs off}
  int kernel_table_n = 0;  // the batch size whose kernels are listed one by one (0: none)
};

// The q-quantile (0..1, nearest rank) of v; 0 when v is empty.
double percentile(std::vector<double> v, double q);

// The tables: wall time per step (graphs on and off), host enqueue and GPU span per step,
// the GPU time by part per graphs mode and, at kernel_table_n, by kernel (means over the
// traced steps but the first, whose trace set-up lands in it).
std::string format_tables(const Results& r);

// a minus b per batch size both have: the wall time per graphs mode, the GPU span and every
// part (graphs on, traced means): where one configuration's extra time goes.
std::string format_difference(const Results& a, const Results& b);

}  // namespace flashserve::bench
