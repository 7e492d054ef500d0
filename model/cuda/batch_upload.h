#pragma once
// A step's batch on its way to the device: what the step needs of the workspace
// (DeviceWorkspace, model/cuda/llama_forward.h), the workspace's growth, and the upload of
// the batch's metadata through a staging buffer, with the gather of the tokens that the
// previous step sampled (overlapped steps). Nothing here synchronises with the host, except
// a growth of the RoPE tables or of ws.results (rare: capacity only grows).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/config.h"
#include "model/cuda/llama_forward.h"
#include "model/runner.h"

namespace flashserve::model::cuda {

// Byte offsets of a batch's arrays in its metadata block.
struct MetadataLayout {
  size_t specs = 0, token_ids = 0, positions = 0, slot_mapping = 0, seqlens_k = 0;
  size_t block_tables = 0, run_cu_seqlens = 0, out_rows = 0, penalty_tokens = 0;
  size_t penalty_counts = 0, gather_pairs = 0;
  size_t bytes = 0;  // the whole block
};

// A batch's metadata packed on the host, upload_batch's first half: what a step needs of the
// workspace is known before anything is reserved or enqueued. The bytes are in
// DeviceWorkspace::metadata_host, until the next pack_batch.
struct PackedBatch {
  DeviceBatch b;  // sizes, runs and results_offset; upload_batch sets the pointers
  MetadataLayout layout;
  bool with_sampling = false;
  int num_gathered = 0;  // tokens that are previous samples: (t, i) pairs at gather_pairs
};

// Builds the metadata: runs, rebased cu_seqlens, output rows (the last token of every
// sequence in `out_seqs`), the (t, i) pairs of batch.previous_samples' entries >= 0, and
// packs it with the batch's own arrays. Host work only.
// REQUIRES: batch passed validate_forward_batch.
PackedBatch pack_batch(const ForwardContext& ctx, const ForwardBatch& batch,
                       const std::vector<int32_t>& out_seqs, bool with_sampling);

// Whether upload_batch(ctx, p, staging_slot) would reallocate a buffer of the workspace (the
// metadata block, the staging buffer, a token buffer, scratch or the RoPE tables).
bool upload_grows_workspace(const ForwardContext& ctx, const PackedBatch& p, int staging_slot);

// Sizes the workspace for the step, copies its metadata into ws.staging[staging_slot] and
// enqueues its upload, then, when the batch names previous samples, the gather of their
// tokens from ws.results (kernels::gather_sampled_tokens): the pass enqueued next (eager or
// a graph replay) reads the complete token ids.
// REQUIRES: p is the last pack_batch's; no launched step still uses that staging buffer, nor
// a buffer that grows (upload_grows_workspace).
absl::StatusOr<DeviceBatch> upload_batch(const ForwardContext& ctx, const PackedBatch& p,
                                         int staging_slot);

// Allocates the step workspace for steps of up to max_tokens tokens and max_seqs sequences
// (and metadata_bytes of batch metadata, in both staging buffers too) at once, so that steps
// within those bounds never reallocate it: a reallocation moves buffers that captured decode
// graphs point into, and makes an overlapped step wait for the one before it.
absl::Status reserve_workspace(const ForwardContext& ctx, int max_tokens, int max_seqs,
                               size_t metadata_bytes);
// Device bytes that reserve_workspace(ctx, max_tokens, max_seqs, metadata_bytes) allocates
// for this config on a device of num_sms SMs (ForwardContext::num_sms; RoPE tables for the
// context length, cuBLASLt's workspace and the weights' dequant_bytes
// (DeviceWeights::max_dequant_bytes) included): the KV cache's budget leaves this much free.
// Computed from the sizes the reserve uses.
int64_t workspace_bytes(const ModelConfig& c, int max_tokens, int max_seqs, int num_sms,
                        size_t metadata_bytes, int64_t dequant_bytes);
// Bytes of batch metadata reserved at start for steps of up to max_tokens tokens and
// max_seqs sequences with block tables table_width wide (penalty lists beyond
// kMetadataSlack grow the buffer, which re-captures the decode graphs once).
size_t metadata_bytes(int max_tokens, int max_seqs, int table_width);

}  // namespace flashserve::model::cuda
