#pragma once
// A layer's small native matrices dequantized together for deq+blas (model/cuda/
// native_gemm_path.h: which ones; DeviceWorkspace::group in model/cuda/llama_forward.h: where
// the copies live): the plan of a layer's group, its one dequantize launch, and where a GEMM
// finds its matrix's copy. llama_forward_cuda calls begin, then prepare before each layer, then
// end; gemm_linear asks by_deq_blas and grouped_copy, and calls group_gemm_done after a GEMM
// that read a copy.
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/quant/quant_gemv.h"
#include "model/cuda/llama_forward.h"

namespace flashserve::model::cuda {

// Whether the pass's step of m tokens multiplies by the native n x k matrix through deq+blas
// (native_gemm_by_deq_blas with the device's crossover).
bool by_deq_blas(int m, int64_t n, int64_t k);

// A pass over num_layers layers of a step of m tokens (`decodes_only`: all decodes): the
// workspace's groups sized (two buffers of the largest layer's group) and emptied.
void begin_dequant_groups(const ForwardContext& ctx, int num_layers, int m, bool decodes_only);

// Before layer `layer`'s first GEMM: its group's copies written on the stream, or, in a
// decode-only step whose groups are forked (native_gemm_group_forked), waited for (layer > 0:
// written on the side stream from two layers earlier on; layer 0's on the stream, with layer
// 1's forked at once).
absl::Status prepare_layer_group(const ForwardContext& ctx, int layer, int num_layers, int m);

// After a GEMM that read the current layer's group: in a decode-only step, once the layer's
// last such GEMM is enqueued, the dequantize of the layer after next is forked onto the side
// stream into the buffer those GEMMs read. Earlier forks had less of the step to hide in: at
// the layer's start the dequantize slowed the RMSNorm it ran beside (bench/serving/NOTES.md
// step 23), before the layer's attention it gained 2-6 % served and still kept the next layer
// waiting (step 24). Nothing in other steps, or past the last layer.
absl::Status group_gemm_done(const ForwardContext& ctx);

// After the last layer: the groups emptied (the LM head's GEMM uses the whole scratch).
void end_dequant_groups(const ForwardContext& ctx);

// The bf16 copy of w in the current layer's group, or null when w is not in it.
const void* grouped_copy(const ForwardContext& ctx, const DeviceMatrix& w);

// The dequantize of the whole native matrix m into `out` (bf16, [m.rows, m.k]): one job of a
// group, or a matrix dequantized alone.
kernels::DequantizeParams whole_matrix_dequantize(const DeviceMatrix& m, uint16_t* out);

}  // namespace flashserve::model::cuda
