#pragma once
// Where one decode step's GPU time goes, from the device activities of that step (kernels
// and copies with their start and end timestamps, as CUPTI reports them:
// bench/serving/kernel_trace.h). Pure functions on plain records, so that the attribution
// rules are tested without a GPU (tests/unit/bench_serving/step_breakdown_test.cc).
//
// Attribution: activities sorted by start; each gets end - max(start, the latest end so
// far), and a gap before an activity's start is idle. With programmatic dependent launch
// (kernels/dependent_launch.cuh) a kernel starts while its predecessor still runs and
// waits for it, so its own time begins where the predecessor's ended; the parts and the
// idle time then add up to the step's span (first start to last end) exactly.
// Position rules: the step's first kernel is the embedding (a gather, or a dequantize of
// native rows); the kernels from the last RMSNorm before the first sampling kernel up to
// it are the final norm and LM head (without a separate norm kernel, the GEMV path of
// steps of up to 8 tokens, the last kernel before sampling is).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace flashserve::bench {

struct GpuActivity {
  std::string name;  // demangled kernel name, or "memcpy"/"memset"
  bool kernel = true;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t stream = 0;      // CUPTI's stream id (a captured graph's branches differ)
  uint32_t grid_ctas = 0;   // a kernel's CTAs (grid x * y * z); 0 for copies
};

// The parts a step is split into, in the order the tables print them.
enum class Part {
  kEmbedding,
  kNorm,
  kRoundActivations,
  kQuantGemm,
  kCublasGemm,
  kSplitKReduce,
  kDequantize,
  kGemv,
  kRope,
  kAttention,
  kSwiglu,
  kLmHead,
  kSampling,
  kOtherKernel,
  kCopy,
  kIdle,
};
inline constexpr int kNumParts = static_cast<int>(Part::kIdle) + 1;
const char* part_name(Part p);

// The kernel's function name without namespaces, template arguments or parameters
// ("quant_gemm_kernel"); the name itself when it has none of these.
std::string kernel_base_name(std::string_view demangled);
// What a kernel computes, by its name (our kernels' names in kernels/, cuBLASLt's GEMM and
// split-k kernels by their families); kOtherKernel for a name it does not know. Position
// parts (kEmbedding, kLmHead) are assigned by break_down_step, not here.
Part kernel_part(std::string_view demangled);
// The weight format of a quantized GEMM or GEMV kernel from its WeightFormat template
// argument (kernels/quant/quant_layout.h): "Q4_K", "Q6_K", ...; "" when it has none.
std::string kernel_format(std::string_view demangled);

struct KernelTotal {
  double seconds = 0;
  int launches = 0;
};

struct StepTime {
  double seconds[kNumParts] = {};
  // Quantized GEMM seconds (kQuantGemm, outside the LM head) by weight format.
  std::map<std::string, double> quant_gemm_by_format;
  // Every kernel by base name and weight format ("quant_gemm_wgmma_ws_kernel Q6_K"), those
  // of the LM head apart ("... [LM head]").
  std::map<std::string, KernelTotal> by_kernel;
  double span = 0;  // seconds from the first activity's start to the last one's end
  int num_kernels = 0;
};

// The breakdown of one step's activities (any order). Empty input: a zero StepTime.
StepTime break_down_step(std::vector<GpuActivity> activities);

// The activities that start in [begin_ns, end_ns).
std::vector<GpuActivity> activities_between(const std::vector<GpuActivity>& all,
                                            uint64_t begin_ns, uint64_t end_ns);

}  // namespace flashserve::bench
