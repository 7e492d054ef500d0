#pragma once
// fp32 reference of kernels/gemv.h: the unfused composition, rounding where the GPU path
// rounds. Inputs and weights are given as the float values of their bf16 bits.
//   kRmsNorm input: rmsnorm_cpu on each (gathered) row, rounded to bf16;
//   products summed in double (the kernel sums in fp32: the test's tolerance covers that);
//   kBf16 output rounded to bf16 (kRopeAppend: the same, the QKV before RoPE, whose reference
//   is rope_cpu + kv_append_cpu); kSwiglu: g, u rounded to bf16, silu(g) * u rounded to bf16.
#include <cstdint>
#include <vector>

#include "kernels/gemv.h"

namespace flashserve::kernels {

struct GemvCpuParams {
  GemvInput input = GemvInput::kBf16;
  const float* x = nullptr;            // [*, k]
  const int32_t* rows = nullptr;       // or null
  const float* norm_weight = nullptr;  // kRmsNorm
  float eps = 0;
  const float* w = nullptr;  // [n, k] or [2 * n, k]
  GemvOutput output = GemvOutput::kBf16;
  float* y = nullptr;        // [m, n]; read too for kFp32Accumulate
  int m = 0, n = 0, k = 0;
};
// The m input rows the GEMV stages, as floats [m, k]: gathered through `rows`, and for
// kRmsNorm normalised and rounded to bf16.
std::vector<float> gemv_input_rows_cpu(const GemvCpuParams& p);

void gemv_cpu(const GemvCpuParams& p);

}  // namespace flashserve::kernels
