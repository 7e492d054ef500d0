#include "model/cuda/decode_graph.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>

#include "base/status_macros.h"
#include "kernels/cuda_check.h"

namespace flashserve::model::cuda {
namespace {

// Every device address a captured graph reads or writes besides the weights and the KV
// cache (which never move): the workspace buffers and the metadata block.
std::vector<const void*> graph_pointers(const ForwardContext& ctx) {
  const DeviceWorkspace& ws = *ctx.ws;
  return {ws.x.get(),        ws.xn.get(),     ws.qkv.get(),      ws.q.get(),
          ws.attn.get(),     ws.gate_up.get(), ws.ffn.get(),     ws.last.get(),
          ws.logits.get(),   ws.attention_scratch.get(), ws.metadata.get(),
          ws.rope_cos.get(), ws.rope_sin.get()};
}

}  // namespace

bool is_decode_batch(const ForwardBatch& batch) {
  const int n = batch.num_seqs();
  if (n == 0 || batch.num_tokens() != n || static_cast<int>(batch.sample_seqs.size()) != n) {
    return false;
  }
  for (int s = 0; s < n; ++s) {
    if (batch.sample_seqs[s] != s) return false;
  }
  return true;  // n tokens over n sequences of >= 1 token each: one token each
}

int decode_bucket(int num_seqs) {
  if (num_seqs <= 8) return std::max(num_seqs, 1);
  // Four buckets per doubling: multiples of 2^(floor(log2(n - 1)) - 2), rounded up.
  const int step = std::bit_floor(static_cast<unsigned>(num_seqs - 1)) / 4;
  return (num_seqs + step - 1) / step * step;
}

ForwardBatch pad_decode_batch(const ForwardBatch& batch, int num_seqs, int max_blocks_per_seq) {
  const int n = batch.num_seqs();
  ForwardBatch p;
  p.token_ids = batch.token_ids;
  p.positions = batch.positions;
  p.slot_mapping = batch.slot_mapping;
  p.seqlens_k = batch.seqlens_k;
  p.token_ids.resize(num_seqs, 0);
  p.positions.resize(num_seqs, 0);
  p.slot_mapping.resize(num_seqs, -1);
  p.seqlens_k.resize(num_seqs, 0);
  p.cu_seqlens_q.resize(num_seqs + 1);
  for (int s = 0; s <= num_seqs; ++s) p.cu_seqlens_q[s] = s;
  p.max_blocks_per_seq = max_blocks_per_seq;
  p.block_tables.assign(static_cast<size_t>(num_seqs) * max_blocks_per_seq, -1);
  for (int s = 0; s < n; ++s) {
    std::copy_n(batch.block_tables.begin() + static_cast<size_t>(s) * batch.max_blocks_per_seq,
                batch.max_blocks_per_seq,
                p.block_tables.begin() + static_cast<size_t>(s) * max_blocks_per_seq);
  }
  p.sample_seqs.resize(num_seqs);
  for (int s = 0; s < num_seqs; ++s) p.sample_seqs[s] = s;
  p.sample_specs = batch.sample_specs;
  p.sample_specs.resize(num_seqs);  // padding rows: default (greedy) specs, never sampled
  p.penalty_tokens = batch.penalty_tokens;
  p.penalty_counts = batch.penalty_counts;
  if (!batch.previous_samples.empty()) {
    p.previous_samples = batch.previous_samples;
    p.previous_samples.resize(num_seqs, -1);
  }
  return p;
}

DecodeGraphs::~DecodeGraphs() {
  for (auto& [shape, entry] : graphs_) {
    if (entry.exec != nullptr) cudaGraphExecDestroy(entry.exec);
  }
}

absl::Status DecodeGraphs::run(const ForwardContext& ctx, const DeviceBatch& b,
                               const DecodeShape& shape, int num_layers) {
  Entry& entry = graphs_[shape];
  if (entry.exec != nullptr && entry.pointers != graph_pointers(ctx)) {
    CUDA_CHECK(cudaGraphExecDestroy(entry.exec));
    entry.exec = nullptr;
  }
  if (entry.exec == nullptr && ++entry.num_uses >= 2) {
    RETURN_IF_ERROR(capture(ctx, b, num_layers, &entry));
  }
  if (entry.exec == nullptr) return llama_forward_cuda(ctx, b, num_layers, nullptr);
  CUDA_CHECK(cudaGraphLaunch(entry.exec, ctx.stream));
  return absl::OkStatus();
}

bool DecodeGraphs::ready(const ForwardContext& ctx, const DecodeShape& shape) const {
  const auto it = graphs_.find(shape);
  return it != graphs_.end() && it->second.exec != nullptr &&
         it->second.pointers == graph_pointers(ctx);
}

absl::Status DecodeGraphs::capture(const ForwardContext& ctx, const DeviceBatch& b,
                                   int num_layers, Entry* entry) {
  // Thread-local mode: a stray synchronising call on this thread fails the capture instead
  // of silently leaving work outside the graph.
  CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status forward = llama_forward_cuda(ctx, b, num_layers, nullptr);
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(ctx.stream, &graph);
  if (!forward.ok() || end != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    RETURN_IF_ERROR(forward);
    CUDA_CHECK(end);
  }
  const cudaError_t instantiated = cudaGraphInstantiate(&entry->exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(instantiated);
  entry->pointers = graph_pointers(ctx);
  return absl::OkStatus();
}

}  // namespace flashserve::model::cuda
