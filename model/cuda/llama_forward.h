#pragma once
// The CUDA forward pass of a Llama-family decoder over one flat (packed) batch. It mirrors
// the CPU forward (model/cpu/llama_forward.cc) function for function; what differs is
// storage and fusion:
//   - the residual stream x is fp32; every GEMM input and output is bf16 except the LM
//     head's logits (fp32) and the O / down projections, which accumulate into x in fp32
//     (cuBLASLt beta = 1: the residual add is the GEMM's epilogue);
//   - Q/K/V is one GEMM over the concatenated weights, and RoPE + the KV append are one
//     kernel (kernels/layers.h) that writes Q packed and K/V into the bf16 paged cache;
//   - gate/up is one GEMM, SwiGLU one kernel;
//   - at small batch (kernels::gemv_supported: up to 8 tokens, i.e. decode of up to 8
//     sequences) every linear layer is one fused GEMV (kernels/gemv.h) instead: RMSNorm +
//     QKV + RoPE + KV append, the O projection + residual, RMSNorm + gate/up + SwiGLU, down
//     + residual, and the final norm + LM head; 4 launches per layer besides attention
//     instead of 8;
//   - attention runs per maximal run of same-phase sequences through our kernels
//     (kernels/attention/attention.h): prefill and chunked prefill through the fused prefill kernel
//     over the paged cache, single-token decodes through the split-KV decode kernel;
//   - the final norm and the LM head run only for the rows that are read (sampled
//     sequences' last tokens), and sampling runs on the device (kernels/sampling.h).
// Everything is enqueued on one stream; nothing here synchronises with the host.
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/attention/attention.h"
#include "kernels/quant/quant_gemm.h"
#include "kernels/sampling.h"
#include "model/config.h"
#include "model/cuda/device_buffer.h"
#include "model/cuda/device_weights.h"
#include "model/cuda/gemm.h"
#include "model/cuda/step_timer.h"
#include "model/runner.h"

namespace flashserve::model::cuda {

// bf16 paged KV cache, one K and one V tensor per layer, each
// [num_blocks, num_kv_heads, block_size, head_dim] (kernels/paged_kv.h).
struct DeviceKvCache {
  DeviceBuffer k, v;  // [num_layers, num_blocks, num_kv_heads, block_size, head_dim]
  int num_blocks = 0;
  int block_size = 0;
  int64_t layer_elements = 0;
  void* k_layer(int layer) const { return k.get<uint16_t>() + layer * layer_elements; }
  void* v_layer(int layer) const { return v.get<uint16_t>() + layer * layer_elements; }
  // Bytes per block over all layers, K and V (to size a cache from a memory budget).
  static int64_t bytes_per_block(const ModelConfig& c, int block_size);
};

// One maximal run of same-phase sequences [s0, s1) whose tokens start at t0.
struct AttentionRun {
  int s0 = 0, s1 = 0, t0 = 0;
  bool prefill = false;
  int max_seqlen_q = 0, max_seqlen_k = 0;
  int cu_offset = 0;  // its cu_seqlens_q, rebased to 0, in DeviceBatch::run_cu_seqlens
  double flops = 0, bytes = 0;  // kernels::attention_cost per layer
};

// The batch as the kernels read it: device pointers into one uploaded block of metadata.
struct DeviceBatch {
  const int32_t* token_ids = nullptr;     // [num_tokens]
  const int32_t* positions = nullptr;     // [num_tokens]
  const int32_t* slot_mapping = nullptr;  // [num_tokens]
  const int32_t* seqlens_k = nullptr;     // [num_seqs]
  const int32_t* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]
  const int32_t* run_cu_seqlens = nullptr;  // the runs' rebased cu_seqlens_q
  const int32_t* out_rows = nullptr;      // [num_out_rows] tokens whose logits are computed
  const int32_t* penalty_tokens = nullptr;  // [num_penalties]
  const int32_t* penalty_counts = nullptr;  // [num_penalties]
  const kernels::SampleSpec* specs = nullptr;  // [num_out_rows] when sampling
  int num_tokens = 0, num_seqs = 0, max_blocks_per_seq = 0, num_out_rows = 0;
  int num_penalties = 0, max_position = 0;
  int staging_slot = 0;       // the DeviceWorkspace::staging buffer of this step
  size_t results_offset = 0;  // where sample_cuda puts the results in that buffer
  std::vector<AttentionRun> runs;
};

// Device scratch of one step, grown on demand (reallocation is rare: capacity only grows).
// After start (reserve_workspace), every buffer grows in upload_batch only
// (model/cuda/batch_upload.h), before its step enqueues anything, and only while no launched
// step can still use it: a runner that
// launches a step while the previous one runs (model/runner.h, overlapped steps) first asks
// upload_grows_workspace and finishes the running step when it says yes
// (model/cuda/cuda_runner.cc, cuda::may_overlap), so no step's buffer is ever freed under it.
struct DeviceWorkspace {
  DeviceBuffer x;          // [num_tokens, hidden] fp32 residual stream
  DeviceBuffer xn;         // [num_tokens, hidden] bf16 normalized sublayer input
  DeviceBuffer qkv;        // [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim] bf16
  DeviceBuffer q;          // [num_tokens, num_heads, head_dim] bf16, rotated
  DeviceBuffer attn;       // [num_tokens, num_heads, head_dim] bf16
  DeviceBuffer gate_up;    // [num_tokens, 2 * ffn_size] bf16
  DeviceBuffer ffn;        // [num_tokens, ffn_size] bf16
  DeviceBuffer last;       // [num_out_rows, hidden] bf16 final-normed rows
  DeviceBuffer logits;     // [num_out_rows, vocab] fp32
  // Scratch of the GEMMs on native matrices (max_dequant_bytes): the bf16 copy a cuBLASLt
  // GEMM reads past kernels::quant_gemm_max_tokens(), or quant_gemm's split-k partial sums below it
  // (half each for [wq; wk] and a wv beside it).
  DeviceBuffer gemm_scratch;
  // Split-KV partials of kernels::attention_decode and split attention_prefill (one run's at a
  // time: the runs go one after another on the step's stream).
  DeviceBuffer attention_scratch;
  DeviceBuffer metadata;         // DeviceBatch's arrays
  // [num_out_rows] kernels::SampleResult of the last step that sampled, until the next one
  // samples: the next step may name them (ForwardBatch::previous_samples), so they survive
  // a growth of the buffer.
  DeviceBuffer results;
  DeviceBuffer penalty_scratch;  // [num_penalties] fp32
  // Host side of metadata uploads and result downloads, one per step in flight (overlapped
  // steps: at most two). While step N's result copy is pending, or its results not yet read,
  // step N + 1 packs its upload into the other buffer (DeviceBatch::staging_slot).
  static constexpr int kNumStagingSlots = 2;
  PinnedBuffer staging[kNumStagingSlots];
  // upload_batch's packing of the step's metadata before its copy into `staging`; kept so
  // that its capacity carries over and a step allocates no host memory for it (at 256
  // sequences of 8k tokens the block tables alone are 128 KiB).
  std::vector<char> metadata_host;
  DeviceBuffer rope_cos, rope_sin;  // [num_rope_positions, head_dim / 2] fp32
  int num_rope_positions = 0;
  // The split-k sum that the quantized GEMM of an O, down or gate/up projection left in
  // gemm_scratch for the kernel that reads its output next (kernels/quant/quant_gemm.h,
  // defer_reduction): the next RMSNorm of x, or SwiGLU, adds it as it reads; any other reader
  // of x first has it added by quant_gemm_reduce (llama_forward.cc, flush_pending). The next
  // write of gemm_scratch is a later GEMM on the same stream, after that reader. Host state
  // of one forward pass: pending_splits <= 1 means none.
  kernels::QuantGemmParams pending;
  int pending_splits = 1;
  // A layer's matrices that take deq+blas and are dequantized together
  // (native_gemm_dequant_grouped): their bf16 copies at offset[i] elements into the layer's
  // buffer, back to back in the layer's order (wv right after [wq; wk]).
  struct DequantGroup {
    static constexpr int kMaxMatrices = 5;  // wqkv, wv, wo, w_gate_up, w_down
    const DeviceMatrix* matrix[kMaxMatrices] = {};
    int64_t offset[kMaxMatrices] = {};
    int count = 0;
    int gemms = 0;  // GEMMs that read the copies ([wq; wk] + wv is one)
    int64_t elements = 0;
  };
  // Layer l's group in group[l % 2], its copies in buffer l % 2 of gemm_scratch
  // (group_stride elements each, none when 0); `current` is the layer being computed. In a
  // step of decodes only (replayed from a graph) whose groups are forked (group_forked) a
  // later layer's copies are written on ForwardContext::side_stream while layer l computes;
  // otherwise each layer's are written on the stream at its start (model/cuda/
  // dequant_group.h). A quantized GEMM keeps its split-k partial sums past both buffers.
  // Host state of one forward pass.
  DequantGroup group[2];
  int64_t group_stride = 0;
  int current_group = 0;
  // The pass's step is all decodes (a captured graph).
  bool decodes_only = false;
  // Its groups are dequantized on the side stream in such a step (native_gemm_group_forked);
  // otherwise each on the stream at its layer's start.
  bool group_forked = false;
  // The pass's tokens, the layer whose group is forked once the current layer's last grouped
  // GEMM is enqueued (-1: none), and the current layer's grouped GEMMs enqueued so far.
  int group_m = 0, fork_layer = -1, group_gemms_done = 0;
};

// Per-step inputs of the pass that do not change between steps.
struct ForwardContext {
  const ModelConfig* config = nullptr;
  const DeviceWeights* weights = nullptr;
  DeviceKvCache* cache = nullptr;
  DeviceWorkspace* ws = nullptr;
  Gemm* gemm = nullptr;
  StepTimer* timer = nullptr;
  int num_sms = 0;
  cudaStream_t stream = nullptr;
  // A second stream and two events for the GEMM of a native wv that runs beside the one of
  // [wq; wk] (gemm_linear): forked from `stream` and joined back into it around the pair,
  // so a captured graph holds the two as parallel branches.
  cudaStream_t side_stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  // More events for the grouped dequantizes on side_stream (DeviceWorkspace::group): the fork,
  // and a join for each of the two buffers (two dequantizes may be in flight).
  cudaEvent_t prefetch_fork = nullptr, prefetch_join[2] = {nullptr, nullptr};
};

// The split-KV count of a decode run: kernels::attention_decode_num_splits on its shape,
// rounded down to a power of two.
int attention_decode_splits(const ForwardContext& ctx, const AttentionRun& r);
// The run's attention shape without pointers (sequences, lengths, heads, head_dim, causal):
// what the split counts and scratch sizes read; attention_run adds the buffers.
kernels::AttentionParams attention_shape(const ForwardContext& ctx, const AttentionRun& r);
// kernels::attention_prefill_num_splits for a prefill run (1 where the portable kernel runs).
int attention_prefill_splits(const ForwardContext& ctx, const AttentionRun& r);

// Runs the first num_layers layers, the final norm and the LM head: ws->logits holds
// [num_out_rows, vocab] fp32 when the stream reaches it. `stats` (may be null) gets the
// attention FLOPs and bytes; times come from the timer after synchronisation.
absl::Status llama_forward_cuda(const ForwardContext& ctx, const DeviceBatch& b,
                                int num_layers, ForwardStats* stats);

// Samples every output row (kernels/sampling.h) into ws.results and enqueues their copy into
// the step's staging buffer (b.staging_slot); *results points at them once the stream has
// passed that copy.
absl::Status sample_cuda(const ForwardContext& ctx, const DeviceBatch& b,
                         const kernels::SampleResult** results);

}  // namespace flashserve::model::cuda
