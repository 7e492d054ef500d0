#pragma once
// A layer's small native matrices dequantized together for deq+blas (model/cuda/
// native_gemm_path.h: which ones; DeviceWorkspace::group in model/cuda/llama_forward.h: where
// the copies live): the plan of a layer's group, its one dequantize launch, and where a GEMM
// finds its matrix's copy. llama_forward_cuda calls begin, then prepare before each layer (and
// fork before its attention), then end; gemm_linear asks by_deq_blas and grouped_copy.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/quant/quant_gemv.h"
#include "model/cuda/llama_forward.h"

namespace flashserve::model::cuda {

// Whether the pass's step of m tokens multiplies by the native n x k matrix through deq+blas
// (native_gemm_by_deq_blas with the device's crossover).
bool by_deq_blas(const ForwardContext& ctx, int m, int64_t n, int64_t k);

// A pass over num_layers layers of a step of m tokens (`decodes_only`: all decodes): the
// workspace's groups sized (two buffers of the largest layer's group) and emptied.
void begin_dequant_groups(const ForwardContext& ctx, int num_layers, int m, bool decodes_only);

// Before layer `layer`'s first GEMM: its group's copies written on the stream, or, in a
// decode-only step, waited for (layer > 0: written on the side stream during the previous
// layer); the next layer's is forked by fork_next_layer_group.
absl::Status prepare_layer_group(const ForwardContext& ctx, int layer, int num_layers, int m);

// In a decode-only step, the next layer's dequantize forked onto the side stream here (the
// caller: right before the layer's attention, the longest kernel of a small model's decode
// layer, which leaves SMs free) instead of at the layer's start, where it slowed the RMSNorm
// it ran beside (bench/serving/NOTES.md, step 23; measured at 256 streams in step 24: SmolLM2
// shape +3-6 %, 1B +2 % served). Nothing in other steps or after the last layer.
absl::Status fork_next_layer_group(const ForwardContext& ctx);

// After the last layer: the groups emptied (the LM head's GEMM uses the whole scratch).
void end_dequant_groups(const ForwardContext& ctx);

// The bf16 copy of w in the current layer's group, or null when w is not in it.
const void* grouped_copy(const ForwardContext& ctx, const DeviceMatrix& w);

// The dequantize of the whole native matrix m into `out` (bf16, [m.rows, m.k]): one job of a
// group, or a matrix dequantized alone.
kernels::DequantizeParams whole_matrix_dequantize(const DeviceMatrix& m, uint16_t* out);

}  // namespace flashserve::model::cuda
