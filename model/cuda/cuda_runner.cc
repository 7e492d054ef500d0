// The CUDA ModelRunner (model/cuda/cuda_backend.h): owns the stream, the device weights,
// the KV cache and the step workspace, and runs model/cuda/llama_forward.h once per step
// with exactly one host synchronisation (on the event after the sampled tokens' copy). Steps
// overlap (model/runner.h): an untimed step that captures no graph and grows no buffer is
// enqueued while the step before it still runs (model/cuda/in_flight.h says when).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kernels/attention/attention.h"
#include "kernels/device.h"
#include "kernels/paged_kv.h"
#include "model/batch_validation.h"
#include "model/cuda/cuda_backend.h"
#include "base/status_macros.h"
#include "kernels/cuda_check.h"
#include "model/cuda/batch_upload.h"
#include "model/cuda/decode_graph.h"
#include "model/cuda/in_flight.h"
#include "model/cuda/llama_forward.h"
#include "model/cuda/warm_up.h"
#include "model/gguf/gguf.h"
#include "model/memory_budget.h"
#include "model/sampling.h"
#include "model/step_budget.h"

namespace flashserve::model {
namespace {

using cuda::DeviceKvCache;

// Every kProfileEvery-th step records the full attention / GEMM / other breakdown. Such a
// step runs eagerly (not from a graph), which costs throughput; the interval trades that cost
// against how often the breakdown is sampled (measured: bench/serving/NOTES.md, steps 6 and 8).
constexpr uint64_t kProfileEvery = 256;
// Of the other eager steps (prefill and mixed; decode with --nocuda_graphs), every
// kAttentionEvery-th, from the first, has its attention launches timed: each timed step adds
// ~60 event records and reads (measured: bench/serving/NOTES.md, step 9).
constexpr uint64_t kAttentionEvery = 8;
// Device memory left free beyond the fraction's reserve, for allocator slack and cuBLASLt.
constexpr int64_t kMarginBytes = int64_t{256} << 20;
constexpr double kMiB = 1 << 20;
// Decode graphs' block tables are at least this wide (1,024 tokens of 64-token blocks): one
// width, one set of graphs, for every sequence up to that length.
constexpr int kMinGraphTableWidth = 16;

struct DeviceProps {
  std::string name;
  int major = 0, minor = 0, num_sms = 0;
  size_t free = 0, total = 0;
};

absl::StatusOr<DeviceProps> query_device() {
  if (kernels::cuda_device_count() == 0) {
    return absl::FailedPreconditionError("device cuda: no CUDA device is visible");
  }
  CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  DeviceProps d{prop.name, prop.major, prop.minor, prop.multiProcessorCount};
  CUDA_CHECK(cudaMemGetInfo(&d.free, &d.total));
  return d;
}

absl::Status check_supported(const ModelConfig& c, const DeviceProps& d,
                             const CudaRunnerOptions& o) {
  if (d.major < 8) {
    return absl::UnimplementedError(absl::StrFormat(
        "device cuda: %s has compute capability %d.%d; the kernels need 8.0 or newer", d.name,
        d.major, d.minor));
  }
  if (c.post_norms || c.gelu_ffn || c.embedding_scale != 1.f || c.sliding_window > 0 ||
      c.attention_scale > 0 || c.fused_projections) {
    // Unimplemented: --device auto then serves the model on the CPU (model_loader.h).
    return absl::UnimplementedError(absl::StrCat(
        "cuda runner: the '", c.architecture,
        "' block (embedding scale, post-norms, GeGLU, sliding-window layers, fused QKV and "
        "gate/up tensors) has no CUDA forward pass yet; the CPU runner serves it (--device cpu)"));
  }
  if (c.head_dim != 64 && c.head_dim != 128) {
    return absl::UnimplementedError(absl::StrCat("cuda runner: unsupported head_dim ",
                                                 c.head_dim, " (supported: 64, 128)"));
  }
  if (c.num_kv_heads < 1 || c.num_heads % c.num_kv_heads != 0 ||
      c.num_heads / c.num_kv_heads > 16) {
    return absl::UnimplementedError(absl::StrCat("cuda runner: num_heads ", c.num_heads,
                                                 " / num_kv_heads ", c.num_kv_heads,
                                                 " is not a GQA ratio in 1..16"));
  }
  if (!(o.gpu_memory_fraction > 0 && o.gpu_memory_fraction <= 1) || o.max_batch_tokens < 1 ||
      o.max_num_seqs < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda runner: gpu_memory_fraction ", o.gpu_memory_fraction, " must be in (0, 1], ",
        "max_batch_tokens ", o.max_batch_tokens, " and max_num_seqs ", o.max_num_seqs,
        " >= 1"));
  }
  return absl::OkStatus();
}

// The batch metadata reserved at start: decode graphs' tables are kMinGraphTableWidth wide.
size_t start_metadata_bytes(const CudaRunnerOptions& o) {
  return cuda::metadata_bytes(o.max_batch_tokens, cuda::decode_bucket(o.max_num_seqs),
                              kMinGraphTableWidth);
}

// A lower bound of the device bytes the weights take once uploaded: bf16 matrices take two
// bytes an element; native ones keep their GGUF blocks (never more than bf16 would take).
int64_t min_weight_bytes(const GgufFile& file, bool native) {
  int64_t bytes = 0;
  for (const GgufTensorInfo& t : file.tensors()) {
    const int64_t bf16 = 2 * t.num_elements;
    bytes += native ? std::min(bf16, static_cast<int64_t>(t.num_bytes)) : bf16;
  }
  return bytes;
}

// Refuses weights that cannot fit in the device's free memory, before any is uploaded.
absl::Status check_weights_fit(const GgufFile& file, const CudaRunnerOptions& o,
                               const DeviceProps& d) {
  return check_fits(
      absl::StrCat("weights ", o.native_weights ? "native" : "bf16",
                   ": the model's weights (at least)"),
      min_weight_bytes(file, o.native_weights), static_cast<int64_t>(d.free) - kMarginBytes,
      absl::StrFormat("%s (%.1f of %.1f MiB free, less a %.0f MiB margin)", d.name,
                      d.free / kMiB, d.total / kMiB, kMarginBytes / kMiB));
}

// The cache: bf16 on the device; by default what gpu_memory_fraction of the device leaves
// after the weights (already uploaded), the step workspace and a margin; an explicit size
// may use everything free beyond the workspace and the margin.
absl::StatusOr<KvCacheBudget> cuda_kv_budget(const ModelConfig& c, const CudaRunnerOptions& o,
                                             const DeviceProps& d, int block_size,
                                             int64_t dequant_bytes) {
  size_t free = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const int64_t workspace = cuda::workspace_bytes(c, o.max_batch_tokens,
                                                  cuda::decode_bucket(o.max_num_seqs), d.num_sms,
                                                  start_metadata_bytes(o), dequant_bytes);
  RETURN_IF_ERROR(check_fits(
      absl::StrCat("max_batch_tokens ", o.max_batch_tokens, " and max_num_seqs ",
                   o.max_num_seqs, ": the step workspace"),
      workspace, static_cast<int64_t>(free) - kMarginBytes,
      absl::StrFormat("%s (%.1f MiB free after the weights, less a %.0f MiB margin)", d.name,
                      free / kMiB, kMarginBytes / kMiB)));
  KvCacheGeometry g;
  g.bytes_per_block = DeviceKvCache::bytes_per_block(c, block_size);
  g.block_size = block_size;
  g.available_bytes = static_cast<int64_t>(free) - kMarginBytes - workspace;
  const int64_t reserve = static_cast<int64_t>((1 - o.gpu_memory_fraction) * total);
  g.default_bytes = g.available_bytes - reserve;
  g.default_source = absl::StrFormat("gpu_memory_fraction %.2f", o.gpu_memory_fraction);
  g.memory_name = absl::StrFormat("%s (%.1f of %.1f MiB free after the weights, less the "
                                  "%.1f MiB step workspace)",
                                  d.name, free / kMiB, total / kMiB, workspace / kMiB);
  g.min_blocks = o.max_num_seqs;
  return resolve_kv_cache(o.kv_cache, g);
}

class CudaModelRunner final : public ModelRunner, public LogitsRunner {
 public:
  CudaModelRunner(const ModelConfig& config, DeviceProps device)
      : config_(config), device_(std::move(device)) {}
  ~CudaModelRunner() override {
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    if (side_stream_ != nullptr) {
      cudaStreamSynchronize(side_stream_);
      cudaStreamDestroy(side_stream_);
    }
    for (cudaEvent_t e : {fork_, join_, prefetch_fork_, prefetch_join_[0], prefetch_join_[1],
                          step_done_[0], step_done_[1]}) {
      if (e != nullptr) cudaEventDestroy(e);
    }
  }

  absl::Status init(const GgufFile& file, const CudaRunnerOptions& options,
                    CudaRunnerInfo* info);

  const ModelConfig& config() const override { return config_; }
  int num_kv_blocks() const override { return cache_.num_blocks; }
  int kv_block_size() const override { return cache_.block_size; }

  // REQUIRES (else FailedPrecondition): no step in flight.
  absl::Status forward(const ForwardBatch& batch, std::vector<SampledToken>* sampled,
                       ForwardStats* stats) override;
  bool overlaps() const override { return true; }
  // FailedPrecondition with two steps in flight; a refused call changes nothing.
  absl::Status launch(const ForwardBatch& batch, ForwardStats* stats) override;
  // FailedPrecondition with no step in flight.
  absl::Status wait(std::vector<SampledToken>* sampled) override;
  // REQUIRES (else FailedPrecondition): no step in flight.
  absl::Status forward_logits(const ForwardBatch& batch, int num_layers,
                              std::vector<float>* logits) override;

 private:
  cuda::ForwardContext context() {
    return {&config_, &weights_, &cache_, &ws_, gemm_.get(), &timer_, device_.num_sms, stream_,
            side_stream_, fork_, join_, prefetch_fork_, {prefetch_join_[0], prefetch_join_[1]}};
  }
  // Enqueues the forward pass of `batch` and its sampling through staging slot `slot`:
  // decode batches padded (model/cuda/decode_graph.h) and, with graphs on, replayed from a
  // graph unless the step is timed in full; any other batch eagerly. A running step is
  // finished first unless cuda::may_overlap. The results are valid once the stream passed
  // the step.
  absl::StatusOr<const kernels::SampleResult*> enqueue_step(const ForwardBatch& batch,
                                                           cuda::TimerMode mode,
                                                           ForwardStats* stats, int slot);
  absl::StatusOr<const kernels::SampleResult*> enqueue_decode_step(const ForwardBatch& batch,
                                                                  cuda::TimerMode mode,
                                                                  ForwardStats* stats, int slot);
  // The step's one host synchronisation (on its step_done_ event), then its timer, stats and
  // tokens (into step->sampled).
  absl::Status finish(cuda::InFlightStep* step);
  // finish() of the step still running, if any, unless the step described by `q` may start
  // beside it (cuda::may_overlap; q.running_timed is filled in here).
  absl::Status finish_running_unless_overlap(cuda::OverlapQuery q);
  absl::StatusOr<const kernels::SampleResult*> enqueue_sampling(const cuda::DeviceBatch& b);
  // Allocates the workspace for the largest step and captures the decode graph of every
  // batch-size bucket up to max_num_seqs (short sequences, one split): a serving run then
  // meets no capture except for long contexts.
  absl::Status prepare_decode_graphs(const CudaRunnerOptions& o);
  // Runs model/cuda/warm_up.h's prefill steps eagerly, untimed; returns their wall seconds.
  absl::StatusOr<double> warm_up_prefill(const CudaRunnerOptions& o);
  void fill_stats(const cuda::StepTimes& t, ForwardStats* stats) const;
  // How the next step is timed when metrics are on: kFull every kProfileEvery-th step (run
  // eagerly, a decode step too), kAttention every kAttentionEvery-th other eager step, else
  // kOff (graph replays are never timed).
  cuda::TimerMode next_timer_mode(const ForwardBatch& batch);

  ModelConfig config_;
  DeviceProps device_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t side_stream_ = nullptr;  // cuda::ForwardContext::side_stream
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  cudaEvent_t prefetch_fork_ = nullptr, prefetch_join_[2] = {nullptr, nullptr};
  cuda::DeviceWeights weights_;
  DeviceKvCache cache_;
  cuda::DeviceWorkspace ws_;
  std::unique_ptr<cuda::Gemm> gemm_;
  cuda::StepTimer timer_;
  bool use_graphs_ = true;
  cuda::DecodeGraphs graphs_;
  uint64_t num_steps_ = 0;
  uint64_t num_eager_steps_ = 0;
  cuda::InFlightSteps in_flight_;
  // Recorded after each slot's step (its result copy): a wait() on step N returns while
  // step N + 1 still runs, where a stream synchronisation would wait for both.
  static_assert(cuda::InFlightSteps::kMaxSteps == cuda::DeviceWorkspace::kNumStagingSlots);
  cudaEvent_t step_done_[cuda::InFlightSteps::kMaxSteps] = {nullptr, nullptr};
};

absl::Status CudaModelRunner::init(const GgufFile& file, const CudaRunnerOptions& o,
                                   CudaRunnerInfo* info) {
  use_graphs_ = o.cuda_graphs;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&prefetch_fork_, cudaEventDisableTiming));
  for (cudaEvent_t& e : prefetch_join_) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  for (cudaEvent_t& e : step_done_) {
    CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  RETURN_IF_ERROR(check_weights_fit(file, o, device_));
  ASSIGN_OR_RETURN(weights_, cuda::upload_llama_weights(file, config_, o.native_weights));
  ASSIGN_OR_RETURN(gemm_, cuda::Gemm::create());
  const int block_size = kernels::kKvBlockSize;
  ASSIGN_OR_RETURN(const KvCacheBudget kv, cuda_kv_budget(config_, o, device_, block_size,
                                                              weights_.max_dequant_bytes));
  const int blocks = kv.num_blocks;
  cache_.num_blocks = blocks;
  cache_.block_size = block_size;
  cache_.layer_elements = int64_t{blocks} * config_.num_kv_heads * block_size * config_.head_dim;
  const size_t cache_bytes = cache_.layer_elements * config_.num_layers * sizeof(uint16_t);
  RETURN_IF_ERROR(cache_.k.allocate(cache_bytes));
  RETURN_IF_ERROR(cache_.v.allocate(cache_bytes));
  RETURN_IF_ERROR(prepare_decode_graphs(o));
  ASSIGN_OR_RETURN(const double warm_up_seconds, warm_up_prefill(o));
  if (info != nullptr) {
    info->summary = absl::StrFormat(
        "cuda: %s (sm_%d%d, %d SMs, %.1f GiB): weights %s; KV cache %d blocks x %d "
        "tokens = %d tokens, %.1f MiB bf16 (%s); decode steps %s; prefill kernels warmed "
        "up in %.0f ms",
        device_.name, device_.major, device_.minor, device_.num_sms, device_.total / kMiB / 1024,
        weights_.summary(), cache_.num_blocks, block_size, cache_.num_blocks * block_size,
        2.0 * cache_bytes / kMiB, kv.source,
        use_graphs_ ? absl::StrCat("through CUDA graphs (", graphs_.num_graphs(),
                                   " captured at start)")
                    : std::string("launched eagerly (cuda_graphs off)"),
        1e3 * warm_up_seconds);
  }
  return absl::OkStatus();
}

absl::StatusOr<double> CudaModelRunner::warm_up_prefill(const CudaRunnerOptions& o) {
  const absl::Time start = absl::Now();
  for (const ForwardBatch& b :
       cuda::warm_up_batches(o.max_batch_tokens, config_.context_length, config_.vocab_size,
                             cache_.num_blocks, cache_.block_size)) {
    RETURN_IF_ERROR(validate_forward_batch(b, config_, cache_.num_blocks, cache_.block_size));
    RETURN_IF_ERROR(
        enqueue_step(b, cuda::TimerMode::kOff, nullptr, in_flight_.next_slot()).status());
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    RETURN_IF_ERROR(timer_.collect().status());
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

absl::Status CudaModelRunner::prepare_decode_graphs(const CudaRunnerOptions& o) {
  const cuda::ForwardContext ctx = context();
  const int max_seqs = cuda::decode_bucket(o.max_num_seqs);
  RETURN_IF_ERROR(
      cuda::reserve_workspace(ctx, o.max_batch_tokens, max_seqs, start_metadata_bytes(o)));
  if (!use_graphs_) return absl::OkStatus();
  for (int n = 1; n <= max_seqs; n = cuda::decode_bucket(n) + 1) {
    // Every row padding: nothing is read from or written to the KV cache.
    const ForwardBatch inert =
        cuda::pad_decode_batch(ForwardBatch{}, cuda::decode_bucket(n), kMinGraphTableWidth);
    RETURN_IF_ERROR(timer_.begin(stream_, cuda::TimerMode::kOff));
    ASSIGN_OR_RETURN(const cuda::DeviceBatch b,
                     cuda::upload_batch(ctx, cuda::pack_batch(ctx, inert, inert.sample_seqs, true),
                                        in_flight_.next_slot()));
    const cuda::DecodeShape shape{inert.num_seqs(), inert.max_blocks_per_seq,
                                  cuda::attention_decode_splits(ctx, b.runs.front())};
    for (int use = 0; use < 2; ++use) {  // eager, then captured (decode_graph.h)
      RETURN_IF_ERROR(graphs_.run(ctx, b, shape, config_.num_layers));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  return absl::OkStatus();
}

void CudaModelRunner::fill_stats(const cuda::StepTimes& t, ForwardStats* stats) const {
  if (stats == nullptr) return;
  stats->prefill.seconds += t.attention_prefill;
  stats->decode.seconds += t.attention_decode;
  stats->breakdown.measured = t.profiled;
  if (!t.profiled) return;
  stats->breakdown.attention_seconds = t.attention_prefill + t.attention_decode;
  stats->breakdown.gemm_seconds = t.gemm;
  stats->breakdown.other_seconds = t.other;
}

absl::Status CudaModelRunner::forward(const ForwardBatch& batch,
                                      std::vector<SampledToken>* sampled, ForwardStats* stats) {
  if (sampled == nullptr) return absl::InvalidArgumentError("cuda runner: sampled is null");
  if (!in_flight_.empty()) {
    return absl::FailedPreconditionError(
        "cuda runner: forward() while a launched step awaits its wait()");
  }
  RETURN_IF_ERROR(launch(batch, stats));
  return wait(sampled);
}

absl::Status CudaModelRunner::launch(const ForwardBatch& batch, ForwardStats* stats) {
  if (in_flight_.full()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda runner: launch() with ", cuda::InFlightSteps::kMaxSteps,
                     " steps in flight (wait() for the older one first)"));
  }
  RETURN_IF_ERROR(validate_forward_batch(batch, config_, cache_.num_blocks, cache_.block_size,
                                         in_flight_.num_previous_samples()));
  // Untimed without stats (metrics off). An untimed step reports no attention (calls,
  // bytes and FLOPs only where the seconds are measured too).
  const cuda::TimerMode mode = stats == nullptr ? cuda::TimerMode::kOff : next_timer_mode(batch);
  const int slot = in_flight_.next_slot();
  ASSIGN_OR_RETURN(const kernels::SampleResult* results,
                   enqueue_step(batch, mode, mode == cuda::TimerMode::kOff ? nullptr : stats,
                                slot));
  CUDA_CHECK(cudaEventRecord(step_done_[slot], stream_));
  cuda::InFlightStep step;
  step.slot = slot;
  step.results = results;
  step.specs = batch.sample_specs;
  step.timer = mode;
  step.stats = stats;
  in_flight_.push(std::move(step));
  return absl::OkStatus();
}

absl::Status CudaModelRunner::wait(std::vector<SampledToken>* sampled) {
  if (sampled == nullptr) return absl::InvalidArgumentError("cuda runner: sampled is null");
  if (in_flight_.empty()) {
    return absl::FailedPreconditionError("cuda runner: wait() with no step in flight");
  }
  if (!in_flight_.oldest().finished) RETURN_IF_ERROR(finish(&in_flight_.oldest()));
  *sampled = in_flight_.pop().sampled;
  return absl::OkStatus();
}

absl::Status CudaModelRunner::finish(cuda::InFlightStep* step) {
  CUDA_CHECK(cudaEventSynchronize(step_done_[step->slot]));  // the step's one host sync
  // A timed step runs alone (cuda::may_overlap): the timer still holds its events.
  cuda::StepTimes times;
  if (step->timer != cuda::TimerMode::kOff) {
    ASSIGN_OR_RETURN(times, timer_.collect());
  }
  fill_stats(times, step->stats);
  step->sampled.resize(step->specs.size());
  for (size_t i = 0; i < step->sampled.size(); ++i) {
    step->sampled[i] = to_sampled_token(step->results[i], step->specs[i], config_.vocab_size);
  }
  step->finished = true;
  return absl::OkStatus();
}

absl::Status CudaModelRunner::finish_running_unless_overlap(cuda::OverlapQuery q) {
  cuda::InFlightStep* running = in_flight_.running();
  if (running == nullptr) return absl::OkStatus();
  q.running_timed = running->timer != cuda::TimerMode::kOff;
  return cuda::may_overlap(q) ? absl::OkStatus() : finish(running);
}

cuda::TimerMode CudaModelRunner::next_timer_mode(const ForwardBatch& batch) {
  if (++num_steps_ % kProfileEvery == 0) return cuda::TimerMode::kFull;
  if (use_graphs_ && cuda::is_decode_batch(batch)) return cuda::TimerMode::kOff;
  return num_eager_steps_++ % kAttentionEvery == 0 ? cuda::TimerMode::kAttention
                                                   : cuda::TimerMode::kOff;
}

absl::StatusOr<const kernels::SampleResult*> CudaModelRunner::enqueue_step(
    const ForwardBatch& batch, cuda::TimerMode mode, ForwardStats* stats, int slot) {
  if (cuda::is_decode_batch(batch)) return enqueue_decode_step(batch, mode, stats, slot);
  const cuda::ForwardContext ctx = context();
  const cuda::PackedBatch packed = cuda::pack_batch(ctx, batch, batch.sample_seqs, true);
  cuda::OverlapQuery q;
  q.timed = mode != cuda::TimerMode::kOff;
  q.grows_workspace = cuda::upload_grows_workspace(ctx, packed, slot);
  RETURN_IF_ERROR(finish_running_unless_overlap(q));
  RETURN_IF_ERROR(timer_.begin(stream_, mode));
  ASSIGN_OR_RETURN(const cuda::DeviceBatch b, cuda::upload_batch(ctx, packed, slot));
  RETURN_IF_ERROR(cuda::llama_forward_cuda(ctx, b, config_.num_layers, stats));
  return enqueue_sampling(b);
}

absl::StatusOr<const kernels::SampleResult*> CudaModelRunner::enqueue_decode_step(
    const ForwardBatch& batch, cuda::TimerMode mode, ForwardStats* stats, int slot) {
  const cuda::ForwardContext ctx = context();
  const ForwardBatch padded = cuda::pad_decode_batch(
      batch, cuda::decode_bucket(batch.num_seqs()),
      std::max(kMinGraphTableWidth, static_cast<int>(std::bit_ceil(
                                        static_cast<unsigned>(batch.max_blocks_per_seq)))));
  // A graph step is untimed: events recorded during capture would become graph nodes. The
  // fully timed steps run the same kernels eagerly, so the breakdown still covers decode.
  const bool graph = use_graphs_ && mode != cuda::TimerMode::kFull;
  const cuda::PackedBatch packed = cuda::pack_batch(ctx, padded, padded.sample_seqs, true);
  const cuda::DecodeShape shape{padded.num_seqs(), padded.max_blocks_per_seq,
                                cuda::attention_decode_splits(ctx, packed.b.runs.front())};
  cuda::OverlapQuery q;
  q.timed = mode != cuda::TimerMode::kOff;
  q.captures_graph = graph && !graphs_.ready(ctx, shape);
  q.grows_workspace = cuda::upload_grows_workspace(ctx, packed, slot);
  RETURN_IF_ERROR(finish_running_unless_overlap(q));
  RETURN_IF_ERROR(timer_.begin(stream_, graph ? cuda::TimerMode::kOff : mode));
  ASSIGN_OR_RETURN(cuda::DeviceBatch b, cuda::upload_batch(ctx, packed, slot));
  if (graph) {
    RETURN_IF_ERROR(graphs_.run(ctx, b, shape, config_.num_layers));
  } else {
    RETURN_IF_ERROR(cuda::llama_forward_cuda(ctx, b, config_.num_layers, stats));
  }
  b.num_out_rows = batch.num_seqs();  // padding rows are not sampled
  return enqueue_sampling(b);
}

absl::StatusOr<const kernels::SampleResult*> CudaModelRunner::enqueue_sampling(
    const cuda::DeviceBatch& b) {
  const kernels::SampleResult* results = nullptr;
  if (b.num_out_rows > 0) RETURN_IF_ERROR(cuda::sample_cuda(context(), b, &results));
  return results;
}

absl::Status CudaModelRunner::forward_logits(const ForwardBatch& batch, int num_layers,
                                             std::vector<float>* logits) {
  if (logits == nullptr) return absl::InvalidArgumentError("cuda runner: logits is null");
  if (!in_flight_.empty()) {
    return absl::FailedPreconditionError(
        "cuda runner: forward_logits() while a launched step awaits its wait()");
  }
  if (num_layers < 1 || num_layers > config_.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("cuda runner: num_layers ", num_layers,
                                                   " outside [1, ", config_.num_layers, "]"));
  }
  RETURN_IF_ERROR(
      validate_forward_batch(batch, config_, cache_.num_blocks, cache_.block_size));
  const cuda::ForwardContext ctx = context();
  RETURN_IF_ERROR(timer_.begin(stream_, cuda::TimerMode::kOff));
  std::vector<int32_t> all(batch.num_seqs());
  for (int s = 0; s < batch.num_seqs(); ++s) all[s] = s;
  ASSIGN_OR_RETURN(const cuda::DeviceBatch b,
                   cuda::upload_batch(ctx, cuda::pack_batch(ctx, batch, all, false),
                                      in_flight_.next_slot()));
  RETURN_IF_ERROR(cuda::llama_forward_cuda(ctx, b, num_layers, nullptr));
  logits->resize(static_cast<size_t>(batch.num_seqs()) * config_.vocab_size);
  CUDA_CHECK(cudaMemcpyAsync(logits->data(), ws_.logits.get(),
                                          logits->size() * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

}  // namespace

bool cuda_backend_built() { return true; }

absl::StatusOr<std::unique_ptr<ModelRunner>> create_cuda_runner(const GgufFile& file,
                                                                const ModelConfig& config,
                                                                const CudaRunnerOptions& options,
                                                                CudaRunnerInfo* info) {
  ASSIGN_OR_RETURN(DeviceProps device, query_device());
  CudaRunnerOptions o = options;
  const bool default_budget = o.max_batch_tokens == 0;
  if (default_budget) {
    o.max_batch_tokens = cuda_default_step_tokens(static_cast<int64_t>(device.total),
                                                  device.major, device.minor);
  }
  RETURN_IF_ERROR(check_supported(config, device, o));
  auto runner = std::make_unique<CudaModelRunner>(config, std::move(device));
  if (absl::Status st = runner->init(file, o, info); !st.ok()) {
    return default_budget ? explain_default_step_budget(std::move(st), o.max_batch_tokens) : st;
  }
  if (info != nullptr) {
    info->max_batch_tokens = o.max_batch_tokens;
    absl::StrAppend(&info->summary, "; steps of up to ", o.max_batch_tokens, " tokens (",
                    default_budget ? "this GPU's default" : "max_batch_tokens", ")");
  }
  return std::unique_ptr<ModelRunner>(std::move(runner));
}

}  // namespace flashserve::model
