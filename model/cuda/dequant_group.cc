#include "model/cuda/dequant_group.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "base/status_macros.h"
#include "kernels/cuda_check.h"
#include "kernels/gemv.h"
#include "kernels/quant/quant_gemm.h"
#include "kernels/quant/quant_gemv.h"
#include "model/cuda/native_gemm_path.h"

namespace flashserve::model::cuda {
namespace {

using Group = DeviceWorkspace::DequantGroup;

// The layer's group for a step of m tokens: each native matrix that the step multiplies by
// deq+blas (past the GEMV's rows) and native_gemm_dequant_grouped takes, [wq; wk] and wv
// together.
Group plan_dequant_group(const DeviceLayer& w, int m) {
  Group g;
  auto add = [&](const DeviceMatrix& a, const DeviceMatrix* b) {
    const int64_t n = a.rows + (b != nullptr ? b->rows : 0);
    if (!a.native() || kernels::gemv_supported(a.format, m, a.k) || !by_deq_blas(m, n, a.k) ||
        !native_gemm_dequant_grouped(n, a.k)) {
      return;
    }
    ++g.gemms;
    for (const DeviceMatrix* part : {&a, b}) {
      if (part == nullptr) continue;
      g.matrix[g.count] = part;
      g.offset[g.count++] = g.elements;
      g.elements += part->rows * part->k;
    }
  };
  add(w.wqkv, w.wv.empty() ? nullptr : &w.wv);
  add(w.wo, nullptr);
  add(w.w_gate_up, nullptr);
  add(w.w_down, nullptr);
  return g;
}

// Layer `layer`'s group planned into group[slot] and its copies written into buffer `slot`,
// one launch on `stream` (nothing for an empty group).
absl::Status dequantize_layer(const ForwardContext& ctx, int layer, int slot, int m,
                              cudaStream_t stream) {
  DeviceWorkspace& ws = *ctx.ws;
  const Group& g = ws.group[slot] = plan_dequant_group(ctx.weights->layers[layer], m);
  if (g.count == 0) return absl::OkStatus();
  uint16_t* base = ws.gemm_scratch.get<uint16_t>() + slot * ws.group_stride;
  kernels::DequantizeParams jobs[Group::kMaxMatrices];
  for (int i = 0; i < g.count; ++i) jobs[i] = whole_matrix_dequantize(*g.matrix[i], base + g.offset[i]);
  return kernels::dequantize_bf16_batch(jobs, g.count, stream);
}

// Layer `target`'s copies forked onto the side stream into buffer target % 2, whose last
// reader (two layers earlier) the stream has enqueued by now; joined by prefetch_join[target % 2].
absl::Status fork_layer_group(const ForwardContext& ctx, int target, int m) {
  const int slot = target % 2;
  CUDA_CHECK(cudaEventRecord(ctx.prefetch_fork, ctx.stream));
  CUDA_CHECK(cudaStreamWaitEvent(ctx.side_stream, ctx.prefetch_fork, 0));
  RETURN_IF_ERROR(dequantize_layer(ctx, target, slot, m, ctx.side_stream));
  CUDA_CHECK(cudaEventRecord(ctx.prefetch_join[slot], ctx.side_stream));
  return absl::OkStatus();
}

}  // namespace

bool by_deq_blas(int m, int64_t n, int64_t k) {
  return native_gemm_by_deq_blas(m, n, k, kernels::quant_gemm_max_tokens());
}

void begin_dequant_groups(const ForwardContext& ctx, int num_layers, int m, bool decodes_only) {
  DeviceWorkspace& ws = *ctx.ws;
  ws.decodes_only = decodes_only;
  // Every layer has the same shapes (the formats may differ): the largest plan, rounded up
  // to 128 elements (256-byte aligned buffers). The groups are forked when every grouped
  // matrix is tiny (native_gemm_group_forked).
  int64_t stride = 0;
  bool any = false, all_tiny = true;
  for (int layer = 0; layer < num_layers; ++layer) {
    const Group g = plan_dequant_group(ctx.weights->layers[layer], m);
    stride = std::max(stride, g.elements);
    for (int i = 0; i < g.count; ++i) {
      any = true;
      all_tiny = all_tiny && native_gemm_group_forked(g.matrix[i]->rows, g.matrix[i]->k);
    }
  }
  ws.group_stride = (stride + 127) / 128 * 128;
  ws.group_forked = any && all_tiny;
  ws.group[0] = ws.group[1] = Group{};
  ws.current_group = 0;
  ws.group_m = m;
  ws.fork_layer = -1;
  ws.group_gemms_done = 0;
}

absl::Status prepare_layer_group(const ForwardContext& ctx, int layer, int num_layers, int m) {
  DeviceWorkspace& ws = *ctx.ws;
  const int slot = layer % 2;
  // A fork the previous layer's GEMMs did not trigger (fewer of them than its group counts)
  // is issued now, before the layer it serves can wait for it.
  if (ws.fork_layer >= 0) {
    const int target = ws.fork_layer;
    ws.fork_layer = -1;
    RETURN_IF_ERROR(fork_layer_group(ctx, target, ws.group_m));
  }
  ws.current_group = slot;
  ws.group_gemms_done = 0;
  if (ws.group_stride == 0) return absl::OkStatus();
  // A step with prefills runs eagerly and host-bound, and a group of small matrices is
  // bandwidth (native_gemm_group_forked): one launch a layer, on the stream, where the
  // layer's first GEMM reads the copies next.
  if (!ws.decodes_only || !ws.group_forked) {
    return dequantize_layer(ctx, layer, slot, m, ctx.stream);
  }
  // A decode-only step (a captured graph, where GPU time counts): layer 0's copies on the
  // stream and layer 1's forked at once (its buffer is free); then each layer waits for its
  // copies, and once its last grouped GEMM is enqueued (group_gemm_done) the copies of the
  // layer after next are forked into the buffer it read. Each dequantize so has the rest of
  // its layer and the whole next one to run in (bench/serving/NOTES.md step 24). Every fork
  // is joined by its layer's wait, so a captured graph ends joined.
  if (layer == 0) {
    RETURN_IF_ERROR(dequantize_layer(ctx, 0, 0, m, ctx.stream));
    if (num_layers > 1) RETURN_IF_ERROR(fork_layer_group(ctx, 1, m));
  } else {
    CUDA_CHECK(cudaStreamWaitEvent(ctx.stream, ctx.prefetch_join[slot], 0));
  }
  ws.fork_layer = layer + 2 < num_layers ? layer + 2 : -1;
  return absl::OkStatus();
}

absl::Status group_gemm_done(const ForwardContext& ctx) {
  DeviceWorkspace& ws = *ctx.ws;
  if (++ws.group_gemms_done < ws.group[ws.current_group].gemms || !ws.decodes_only ||
      ws.fork_layer < 0) {
    return absl::OkStatus();
  }
  const int target = ws.fork_layer;
  ws.fork_layer = -1;
  return fork_layer_group(ctx, target, ws.group_m);
}

void end_dequant_groups(const ForwardContext& ctx) {
  DeviceWorkspace& ws = *ctx.ws;
  ws.group[0] = ws.group[1] = Group{};
  ws.group_stride = 0;
}

kernels::DequantizeParams whole_matrix_dequantize(const DeviceMatrix& m, uint16_t* out) {
  kernels::DequantizeParams d;
  d.format = m.format;
  d.w = m.get();
  d.num_rows = m.rows;
  d.k = m.k;
  d.row_begin = 0;
  d.row_end = m.rows;
  d.out = out;
  return d;
}

const void* grouped_copy(const ForwardContext& ctx, const DeviceMatrix& w) {
  const DeviceWorkspace& ws = *ctx.ws;
  const Group& g = ws.group[ws.current_group];
  for (int i = 0; i < g.count; ++i) {
    if (g.matrix[i] == &w) {
      return ws.gemm_scratch.get<uint16_t>() + ws.current_group * ws.group_stride + g.offset[i];
    }
  }
  return nullptr;
}

}  // namespace flashserve::model::cuda
