#include "bench/serving/decode_step_tables.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace flashserve::bench {
namespace {

constexpr const char* kModeNames[2] = {"graphs on", "graphs off"};

// The traced steps that count: all but the first when there are more than one.
std::vector<StepTime> counted(const TracedSteps& t) {
  if (t.steps.size() <= 1) return t.steps;
  return std::vector<StepTime>(t.steps.begin() + 1, t.steps.end());
}

std::vector<double> counted(const std::vector<double>& v) {
  if (v.size() <= 1) return v;
  return std::vector<double>(v.begin() + 1, v.end());
}

std::string ms(double seconds) { return absl::StrFormat("%.3f", seconds * 1e3); }

// A table's header and rule with one column per batch size after the first, `first`.
std::string batch_size_header(const std::string& first, const std::vector<int>& sizes) {
  std::string head = "| " + first + " |", rule = "|---|";
  for (const int n : sizes) {
    absl::StrAppend(&head, " N=", n, " |");
    rule += "---|";
  }
  return head + "\n" + rule + "\n";
}

// Wall time of the timed steps: one row per batch size.
std::string wall_table(const Results& r) {
  const bool cuda = r.device == "cuda";
  std::string out = "\n### Decode step wall time (ModelRunner::forward, timed steps)\n\n";
  out += cuda ? "| N | graphs on p50 ms | p10-p90 ms | tokens/s | graphs off p50 ms | p10-p90 ms "
                "| off - on ms |\n|---|---|---|---|---|---|---|\n"
              : "| N | CPU step p50 ms | p10-p90 ms | tokens/s |\n|---|---|---|---|\n";
  for (const auto& [n, modes] : r.rows) {
    const std::vector<double>& on = modes[0].wall;
    const std::vector<double>& off = modes[1].wall;
    const auto cells = [](const std::vector<double>& v) {
      if (v.empty()) return std::string(" - | - |");
      return absl::StrCat(" ", ms(percentile(v, 0.5)), " | ", ms(percentile(v, 0.1)), "-",
                          ms(percentile(v, 0.9)), " |");
    };
    const double p50 = percentile(on.empty() ? off : on, 0.5);
    absl::StrAppend(&out, "| ", n, " |", cells(on), " ",
                    p50 > 0 ? absl::StrFormat("%.0f", n / p50) : std::string("-"), " |");
    if (cuda) {
      absl::StrAppend(&out, cells(off), " ",
                      on.empty() || off.empty()
                          ? std::string("-")
                          : ms(percentile(off, 0.5) - percentile(on, 0.5)),
                      " |");
    }
    out += "\n";
  }
  return out;
}

// Host enqueue, GPU span and idle of the traced steps (medians).
std::string host_table(const Results& r) {
  bool any = false;
  for (const auto& [n, modes] : r.rows) any = any || !modes[0].traced.steps.empty() ||
                                              !modes[1].traced.steps.empty();
  if (!any) return "";
  std::string out =
      "\n### Host and GPU per step (traced steps, medians)\n\n"
      "wall: forward() called to returned; enqueue: until it entered cudaStreamSynchronize; "
      "span: first GPU activity's start to the last one's end; idle: gaps inside the span; "
      "wall - span: host time not overlapped by GPU work.\n\n"
      "| N | mode | wall ms | enqueue ms | GPU span ms | GPU idle ms | wall - span ms | "
      "kernels |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& [n, modes] : r.rows) {
    for (int m = 0; m < 2; ++m) {
      const TracedSteps& t = modes[m].traced;
      if (t.steps.empty()) continue;
      std::vector<double> span, idle, kernels;
      for (const StepTime& s : counted(t)) {
        span.push_back(s.span);
        idle.push_back(s.seconds[static_cast<int>(Part::kIdle)]);
        kernels.push_back(s.num_kernels);
      }
      const double wall = percentile(counted(t.wall), 0.5);
      absl::StrAppend(&out, "| ", n, " | ", kModeNames[m], " | ", ms(wall), " | ",
                      ms(percentile(counted(t.enqueue), 0.5)), " | ",
                      ms(percentile(span, 0.5)), " | ", ms(percentile(idle, 0.5)), " | ",
                      ms(wall - percentile(span, 0.5)), " | ",
                      absl::StrFormat("%.0f", percentile(kernels, 0.5)), " |\n");
    }
  }
  return out;
}

// Mean of f over the counted steps of t.
template <typename F>
double mean_of(const TracedSteps& t, F f) {
  const std::vector<StepTime> steps = counted(t);
  if (steps.empty()) return 0;
  double sum = 0;
  for (const StepTime& s : steps) sum += f(s);
  return sum / steps.size();
}

// GPU time by part under graphs mode m: one row per part, one column per batch size.
std::string part_table(const Results& r, int m) {
  std::vector<int> sizes;
  std::set<std::string> formats;
  for (const auto& [n, modes] : r.rows) {
    if (modes[m].traced.steps.empty()) continue;
    sizes.push_back(n);
    for (const StepTime& s : modes[m].traced.steps) {
      for (const auto& [f, seconds] : s.quant_gemm_by_format) formats.insert(f);
    }
  }
  if (sizes.empty()) return "";
  std::string out = absl::StrCat("\n### GPU time by part, ", kModeNames[m],
                                 " (ms per step, mean of the traced steps)\n\n");
  out += batch_size_header("part", sizes);
  const auto row = [&](const std::string& name, auto f) {
    out += "| " + name + " |";
    for (const int n : sizes) {
      absl::StrAppend(&out, " ", ms(mean_of(r.rows.at(n)[m].traced, f)), " |");
    }
    out += "\n";
  };
  for (int p = 0; p < kNumParts; ++p) {
    const auto f = [p](const StepTime& s) { return s.seconds[p]; };
    bool any = false;
    for (const int n : sizes) any = any || mean_of(r.rows.at(n)[m].traced, f) > 0;
    if (!any) continue;
    row(part_name(static_cast<Part>(p)), f);
    if (static_cast<Part>(p) != Part::kQuantGemm) continue;
    for (const std::string& format : formats) {
      row("  of which " + (format.empty() ? std::string("(format ?)") : format),
          [&format](const StepTime& s) {
            const auto it = s.quant_gemm_by_format.find(format);
            return it == s.quant_gemm_by_format.end() ? 0.0 : it->second;
          });
    }
  }
  row("**span (sum of the above)**", [](const StepTime& s) { return s.span; });
  out += "| kernels per step |";
  for (const int n : sizes) {
    absl::StrAppend(&out, " ", absl::StrFormat("%.0f", mean_of(r.rows.at(n)[m].traced,
                                                               [](const StepTime& s) {
                                                                 return 1.0 * s.num_kernels;
                                                               })),
                    " |");
  }
  return out + "\n";
}

// The kernels of the steps of batch size n under graphs mode m, the costliest first.
std::string kernel_table(const Results& r, int n, int m) {
  const auto it = r.rows.find(n);
  if (it == r.rows.end() || it->second[m].traced.steps.empty()) return "";
  const std::vector<StepTime> steps = counted(it->second[m].traced);
  std::map<std::string, KernelTotal> sum;
  for (const StepTime& s : steps) {
    for (const auto& [name, k] : s.by_kernel) {
      sum[name].seconds += k.seconds;
      sum[name].launches += k.launches;
    }
  }
  std::vector<std::pair<std::string, KernelTotal>> sorted(sum.begin(), sum.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
    return x.second.seconds > y.second.seconds;
  });
  std::string out = absl::StrCat("\n### Kernels at N=", n, ", ", kModeNames[m],
                                 " (per step: launches, ms charged as in the parts)\n\n"
                                 "| kernel | launches | ms |\n|---|---|---|\n");
  for (const auto& [name, k] : sorted) {
    absl::StrAppend(&out, "| ", name, " | ",
                    absl::StrFormat("%.1f", 1.0 * k.launches / steps.size()), " | ",
                    ms(k.seconds / steps.size()), " |\n");
  }
  return out;
}

// One row of the difference table: f(a) - f(b) per batch size both have.
template <typename F>
std::string difference_row(const std::string& name, const std::vector<int>& sizes, F f) {
  std::string out = "| " + name + " |";
  for (const int n : sizes) absl::StrAppend(&out, " ", ms(f(n)), " |");
  return out + "\n";
}

}  // namespace

std::string format_difference(const Results& a, const Results& b) {
  std::vector<int> sizes;
  for (const auto& [n, modes] : a.rows) {
    if (b.rows.count(n) > 0) sizes.push_back(n);
  }
  if (sizes.empty()) return "";
  std::string out = absl::StrCat("\n### ", a.label, " minus ", b.label,
                                 " (ms per step; parts: graphs on, traced means)\n\n");
  out += batch_size_header("", sizes);
  for (int m = 0; m < 2; ++m) {
    out += difference_row(absl::StrCat("wall p50, ", kModeNames[m]), sizes, [&](int n) {
      const std::vector<double>& x = a.rows.at(n)[m].wall;
      const std::vector<double>& y = b.rows.at(n)[m].wall;
      return x.empty() || y.empty() ? 0.0 : percentile(x, 0.5) - percentile(y, 0.5);
    });
  }
  const auto traced = [&](const Results& r, int n, auto f) {
    return mean_of(r.rows.at(n)[0].traced, f);
  };
  const auto span = [](const StepTime& s) { return s.span; };
  out += difference_row("GPU span", sizes,
                        [&](int n) { return traced(a, n, span) - traced(b, n, span); });
  for (int p = 0; p < kNumParts; ++p) {
    const auto f = [p](const StepTime& s) { return s.seconds[p]; };
    bool any = false;
    for (const int n : sizes) any = any || traced(a, n, f) > 0 || traced(b, n, f) > 0;
    if (!any) continue;
    out += difference_row(part_name(static_cast<Part>(p)), sizes,
                          [&](int n) { return traced(a, n, f) - traced(b, n, f); });
  }
  return out;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

std::string format_tables(const Results& r) {
  std::string out = absl::StrCat("## Decode step: ", r.label, ", ", r.title, "\n\n");
  for (const std::string& s : r.summary) absl::StrAppend(&out, "- ", s, "\n");
  out += wall_table(r);
  out += host_table(r);
  out += part_table(r, 0);
  out += part_table(r, 1);
  out += kernel_table(r, r.kernel_table_n, 0);
  out += kernel_table(r, r.kernel_table_n, 1);
  return out;
}

}  // namespace flashserve::bench
