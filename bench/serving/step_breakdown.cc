#include "bench/serving/step_breakdown.h"

#include <algorithm>
#include <cctype>

namespace flashserve::bench {

const char* part_name(Part p) {
  switch (p) {
    case Part::kEmbedding: return "embedding";
    case Part::kNorm: return "RMSNorm";
    case Part::kRoundActivations: return "round_activations_q8";
    case Part::kQuantGemm: return "quant_gemm";
    case Part::kCublasGemm: return "cuBLASLt GEMM";
    case Part::kSplitKReduce: return "split-k reduce";
    case Part::kDequantize: return "dequantize (to bf16)";
    case Part::kGemv: return "GEMV (fused)";
    case Part::kRope: return "RoPE + KV append";
    case Part::kAttention: return "attention";
    case Part::kSwiglu: return "SwiGLU";
    case Part::kLmHead: return "final norm + LM head";
    case Part::kSampling: return "sampling";
    case Part::kOtherKernel: return "other kernels";
    case Part::kCopy: return "copies (metadata, results)";
    case Part::kIdle: return "GPU idle (gaps)";
  }
  return "?";
}

std::string kernel_base_name(std::string_view demangled) {
  std::string s(demangled);
  for (const std::string_view anon : {"(anonymous namespace)", "{anonymous}"}) {
    for (size_t at; (at = s.find(anon)) != std::string::npos;) s.replace(at, anon.size(), "anon");
  }
  // A leading return type ("void ") ends at the first space before any '<' or '('.
  const size_t open = s.find_first_of("<(");
  const size_t space = s.rfind(' ', open == std::string::npos ? s.size() : open);
  size_t begin = space == std::string::npos ? 0 : space + 1;
  const size_t end = std::min(open, s.size());
  const size_t colons = s.rfind("::", end);
  if (colons != std::string::npos && colons >= begin) begin = colons + 2;
  return s.substr(begin, end - begin);
}

Part kernel_part(std::string_view demangled) {
  const std::string base = kernel_base_name(demangled);
  const auto has = [&](std::string_view part) { return base.find(part) != std::string::npos; };
  if (has("sampling_kernel")) return Part::kSampling;
  if (has("attention_")) return Part::kAttention;
  if (has("quant_gemm")) return Part::kQuantGemm;
  if (has("reduce_splits") || has("splitKreduce") || has("splitK_reduce")) {
    return Part::kSplitKReduce;
  }
  if (base == "round_kernel") return Part::kRoundActivations;
  if (has("dequantize_kernel")) return Part::kDequantize;
  if (has("gemv_kernel")) return Part::kGemv;
  if (has("rmsnorm_kernel")) return Part::kNorm;
  if (has("rope_append_kernel")) return Part::kRope;
  if (has("swiglu_kernel")) return Part::kSwiglu;
  if (has("embedding_kernel")) return Part::kEmbedding;
  std::string lower = base;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const std::string_view family : {"gemm", "nvjet", "xmma", "cutlass", "cublas"}) {
    if (lower.find(family) != std::string::npos) return Part::kCublasGemm;
  }
  return Part::kOtherKernel;
}

std::string kernel_format(std::string_view demangled) {
  // kernels/quant/quant_layout.h: enum class WeightFormat { kBf16 = 0, kQ8_0, ... }.
  static constexpr const char* kNames[] = {"bf16", "Q8_0", "Q4_0", "Q4_1",
                                           "Q4_K", "Q5_K", "Q6_K"};
  const std::string_view key = "WeightFormat)";
  const size_t at = demangled.find(key);
  if (at == std::string_view::npos) return "";
  const size_t digit = at + key.size();
  if (digit >= demangled.size() || !std::isdigit(static_cast<unsigned char>(demangled[digit]))) {
    return "";
  }
  const int f = demangled[digit] - '0';
  const bool one_digit = digit + 1 >= demangled.size() ||
                         !std::isdigit(static_cast<unsigned char>(demangled[digit + 1]));
  if (!one_digit || f >= static_cast<int>(std::size(kNames))) return "format " + std::to_string(f);
  return kNames[f];
}

namespace {

// The parts of the sorted activities: by name, then the position rules (step_breakdown.h).
std::vector<Part> assign_parts(const std::vector<GpuActivity>& a) {
  std::vector<Part> parts(a.size());
  int first_kernel = -1, first_sampling = static_cast<int>(a.size());
  for (int i = 0; i < static_cast<int>(a.size()); ++i) {
    parts[i] = a[i].kernel ? kernel_part(a[i].name) : Part::kCopy;
    if (!a[i].kernel) continue;
    if (first_kernel < 0) first_kernel = i;
    if (parts[i] == Part::kSampling && first_sampling == static_cast<int>(a.size())) {
      first_sampling = i;
    }
  }
  if (first_kernel < 0) return parts;
  parts[first_kernel] = Part::kEmbedding;
  int head = -1, last_kernel = -1;
  for (int i = first_sampling - 1; i > first_kernel; --i) {
    if (!a[i].kernel) continue;
    if (last_kernel < 0) last_kernel = i;
    if (parts[i] == Part::kNorm) {
      head = i;
      break;
    }
    if (parts[i] == Part::kAttention) break;  // no final norm kernel after the last layer's
  }
  if (head < 0) head = last_kernel;
  for (int i = std::max(head, 0); head >= 0 && i < first_sampling; ++i) {
    if (a[i].kernel) parts[i] = Part::kLmHead;
  }
  return parts;
}

}  // namespace

StepTime break_down_step(std::vector<GpuActivity> activities) {
  StepTime t;
  if (activities.empty()) return t;
  std::stable_sort(activities.begin(), activities.end(),
                   [](const GpuActivity& x, const GpuActivity& y) {
                     return x.start_ns < y.start_ns;
                   });
  const std::vector<Part> parts = assign_parts(activities);
  uint64_t covered = activities.front().start_ns;  // the latest end so far
  for (size_t i = 0; i < activities.size(); ++i) {
    const GpuActivity& a = activities[i];
    if (a.start_ns > covered) {
      t.seconds[static_cast<int>(Part::kIdle)] += (a.start_ns - covered) * 1e-9;
      covered = a.start_ns;
    }
    const double own = a.end_ns > covered ? (a.end_ns - covered) * 1e-9 : 0.0;
    covered = std::max(covered, a.end_ns);
    t.seconds[static_cast<int>(parts[i])] += own;
    if (parts[i] == Part::kQuantGemm) t.quant_gemm_by_format[kernel_format(a.name)] += own;
    if (!a.kernel) continue;
    ++t.num_kernels;
    const std::string format = kernel_format(a.name);
    KernelTotal& k = t.by_kernel[kernel_base_name(a.name) + (format.empty() ? "" : " " + format) +
                                 (parts[i] == Part::kLmHead ? " [LM head]" : "")];
    k.seconds += own;
    ++k.launches;
  }
  t.span = (covered - activities.front().start_ns) * 1e-9;
  return t;
}

std::vector<GpuActivity> activities_between(const std::vector<GpuActivity>& all,
                                            uint64_t begin_ns, uint64_t end_ns) {
  std::vector<GpuActivity> out;
  for (const GpuActivity& a : all) {
    if (a.start_ns >= begin_ns && a.start_ns < end_ns) out.push_back(a);
  }
  return out;
}

}  // namespace flashserve::bench
