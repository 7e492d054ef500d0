#include "model/cuda/dequant_prefetch.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/gemv.h"
#include "kernels/quant/quant_gemm.h"
#include "kernels/quant/quant_gemv.h"
#include "model/cuda/dequant_group.h"
#include "model/cuda/native_gemm_path.h"

namespace flashserve::model::cuda {
namespace {

using Prefetch = DeviceWorkspace::MatrixPrefetch;

int64_t round_up_128(int64_t elements) { return (elements + 127) / 128 * 128; }

// Entry i's copy (both parts, back to back) written into its slot on `stream`: the same
// launches as the one-by-one path (dequantize_bf16 batches several units a thread for large
// matrices; the batched launch of the groups takes one a thread, made for small ones).
absl::Status dequantize_entry(const ForwardContext& ctx, int i, cudaStream_t stream) {
  const Prefetch& p = ctx.ws->prefetch;
  uint16_t* out = ctx.ws->gemm_scratch.get<uint16_t>() + p.slot_offset[i % 2];
  RETURN_IF_ERROR(kernels::dequantize_bf16(whole_matrix_dequantize(*p.a[i], out), stream));
  if (p.b[i] == nullptr) return absl::OkStatus();
  return kernels::dequantize_bf16(
      whole_matrix_dequantize(*p.b[i], out + p.a[i]->rows * p.a[i]->k), stream);
}

// Entry i forked onto the side stream after everything the stream has enqueued so far (in
// particular the GEMM that last read its slot), joined by prefetch_join[i % 2].
absl::Status fork_entry(const ForwardContext& ctx, int i) {
  CUDA_CHECK(cudaEventRecord(ctx.prefetch_fork, ctx.stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.side_stream, ctx.prefetch_fork, 0));
  RETURN_IF_ERROR(dequantize_entry(ctx, i, ctx.side_stream));
  CUDA_CHECK(cudaEventRecord(ctx.prefetch_join[i % 2], ctx.side_stream));
  return absl::OkStatus();
}

}  // namespace

DequantPrefetchPlan plan_dequant_prefetch(const std::vector<DeviceLayer>& layers,
                                          int num_layers, int m, int max_tokens) {
  DequantPrefetchPlan plan;
  // The predicate of gemm_linear's path to a copy of its own: native, past the GEMV's rows,
  // deq+blas at m, and not in the layer's group (dequant_group.cc: plan_dequant_group).
  auto add = [&](const DeviceMatrix& a, const DeviceMatrix* b) {
    if (b != nullptr && b->empty()) b = nullptr;
    const int64_t n = a.rows + (b != nullptr ? b->rows : 0);
    if (!a.native() || kernels::gemv_supported(a.format, m, static_cast<int>(a.k)) ||
        !native_gemm_by_deq_blas(m, n, a.k, max_tokens) || native_gemm_dequant_grouped(n, a.k)) {
      return;
    }
    const int64_t elements = n * a.k;
    int64_t& slot = plan.slot_elements[plan.entries.size() % 2];
    slot = std::max(slot, round_up_128(elements));
    plan.entries.push_back({&a, b, elements});
  };
  for (int layer = 0; layer < num_layers && layer < static_cast<int>(layers.size()); ++layer) {
    const DeviceLayer& l = layers[layer];
    add(l.wqkv, &l.wv);
    add(l.wo, nullptr);
    add(l.w_gate_up, nullptr);
    add(l.w_down, nullptr);
  }
  return plan;
}

int64_t dequant_prefetch_elements(const std::vector<DeviceLayer>& layers, int max_tokens) {
  const DequantPrefetchPlan plan =
      plan_dequant_prefetch(layers, static_cast<int>(layers.size()), max_tokens + 1, max_tokens);
  return plan.slot_elements[0] + plan.slot_elements[1];
}

absl::Status begin_dequant_prefetch(const ForwardContext& ctx, int num_layers, int m,
                                    bool decodes_only) {
  Prefetch& p = ctx.ws->prefetch;
  p = Prefetch{};
  if (decodes_only) return absl::OkStatus();
  const DequantPrefetchPlan plan = plan_dequant_prefetch(
      ctx.weights->layers, num_layers, m, kernels::quant_gemm_max_tokens());
  if (plan.entries.empty()) return absl::OkStatus();
  // Past the two group buffers, which this pass's grouped GEMMs still read.
  const int64_t base = 2 * ctx.ws->group_stride;
  const int64_t needed = (base + plan.slot_elements[0] + plan.slot_elements[1]) * 2;
  if (needed > static_cast<int64_t>(ctx.ws->gemm_scratch.bytes())) {
    return absl::InternalError(absl::StrCat("dequant prefetch: ", needed,
                                            " bytes of GEMM scratch needed, ",
                                            ctx.ws->gemm_scratch.bytes(), " reserved"));
  }
  for (const DequantPrefetchPlan::Entry& e : plan.entries) {
    p.a.push_back(e.a);
    p.b.push_back(e.b);
  }
  p.slot_offset[0] = base;
  p.slot_offset[1] = base + plan.slot_elements[0];
  // Both slots are free: the previous pass's GEMMs are behind on the stream.
  RETURN_IF_ERROR(fork_entry(ctx, 0));
  if (p.a.size() > 1) RETURN_IF_ERROR(fork_entry(ctx, 1));
  return absl::OkStatus();
}

absl::StatusOr<const void*> prefetched_copy(const ForwardContext& ctx, const DeviceMatrix& w) {
  const Prefetch& p = ctx.ws->prefetch;
  if (p.a.empty()) return static_cast<const void*>(nullptr);
  if (p.next >= static_cast<int>(p.a.size()) || p.a[p.next] != &w) {
    return absl::InternalError(absl::StrCat(
        "dequant prefetch: the GEMM of a ", w.rows, " x ", w.k, " matrix is not entry ", p.next,
        " of the pass's ", p.a.size()));
  }
  CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, ctx.prefetch_join[p.next % 2], 0));
  return static_cast<const void*>(ctx.ws->gemm_scratch.get<uint16_t>() +
                                  p.slot_offset[p.next % 2]);
}

absl::Status prefetch_gemm_done(const ForwardContext& ctx) {
  Prefetch& p = ctx.ws->prefetch;
  const int done = p.next++;
  if (done + 2 < static_cast<int>(p.a.size())) return fork_entry(ctx, done + 2);
  return absl::OkStatus();
}

absl::Status end_dequant_prefetch(const ForwardContext& ctx) {
  Prefetch& p = ctx.ws->prefetch;
  const int planned = static_cast<int>(p.a.size());
  const int used = p.next;
  if (used < planned) {
    // A pass that stopped early (an error) may leave up to two copies in flight: the stream
    // waits for them, so that no later kernel meets them writing the scratch.
    // (This pass recorded the join of each slot it forked into: both, or one for one entry.)
    for (int slot = 0; slot < std::min(planned, 2); ++slot) {
      CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, ctx.prefetch_join[slot], 0));
    }
  }
  p = Prefetch{};
  if (used != planned) {
    return absl::InternalError(absl::StrCat("dequant prefetch: ", used, " of the pass's ",
                                            planned, " planned GEMMs ran"));
  }
  return absl::OkStatus();
}

}  // namespace flashserve::model::cuda
