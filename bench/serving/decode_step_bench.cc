// flashserve-bench-decode-step --model PATH [--device cuda|cpu] [--weights native,bf16]
//     [--batch-sizes 1,8,16,32,64,128,256] [--context 192] [--steps 50] [--warmup 5]
//     [--trace-steps 8] [--kernels-at 64] [--graphs both|on|off] [--max-batch-tokens 2048]
//     [--threads N] [--prompt-len L] [--mixed-prompt-len L]
//
// One decode step of N sequences through the model runner, as the engine runs it: N
// sequences' prompts (--context tokens of random ids each) are prefilled once, then every
// measured step is a pure decode batch of the first N sequences, each feeding back the
// token sampled for it in the previous step, at a fixed position (the step rewrites the
// same KV slot every time, so the context stays --context + 1 keys however many steps run).
// Per N it prints Markdown tables:
//   - the step's wall time through ModelRunner::forward (host enqueue, GPU work, the one
//     sync, the results), median and p10-p90 over --steps steps, with CUDA graphs on (as
//     served) and off (a second runner on the same file; --graphs picks);
//   - from --trace-steps steps traced with CUPTI (bench/serving/kernel_trace.h), separately
//     from the timed ones: the GPU time by kernel kind (step_breakdown.h: quant_gemm by
//     weight format, cuBLASLt, split-k reduce, round_activations_q8, dequantize, GEMV,
//     norms, RoPE, attention, SwiGLU, final norm + LM head, sampling, copies, idle gaps);
//     the host time to enqueue the step (until forward() entered cudaStreamSynchronize) and
//     the GPU span (first copy to last), per graphs mode; at N = --kernels-at, every kernel
//     (name and weight format) with its launches and time per step;
//   - with two --weights formats (native,bf16), the first minus the second: wall times, span
//     and every part, per N.
// With --prompt-len L > 0 every measured step is instead a prefill step: N sequences bring L
// new prompt tokens each (positions 0 .. L - 1, rewriting the same KV slots every step, the
// last token of each sampled), N * L <= --max-batch-tokens: the steps a server runs when
// requests arrive (16 x 128 is a 2,048-token step of 128-token prompts). Prefill steps are
// never captured in CUDA graphs, so --graphs on and off time the same thing there.
// With --mixed-prompt-len L > 0 every measured step is the N decodes plus one more sequence's
// L-token prompt (positions 0 .. L - 1 of a sequence of its own, rewritten every step, its
// last token sampled): the step a server runs when a request arrives while N decode, which
// at 64 streams of 128-token prompts is about every other step. Never captured either.
// Runners are loaded one at a time (weights format x graphs mode), each prefilling anew.
// Two weights modes compared here carry a position effect: a mode's steps read up to ~0.1-0.2
// ms (on 1.1-1.8 ms SmolLM2-shape steps) faster or slower by where it ran, in one process
// or in two processes one after the other (H200; bench/serving/NOTES.md, step 23): quote a
// difference only from runs repeated in alternating order, or from served runs.
// --device cpu runs the CPU backend (wall times only): a dry run of the batch building.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/command_line.h"
#include "base/status_macros.h"
#include "bench/serving/decode_step_tables.h"
#include "bench/serving/kernel_trace.h"
#include "kernels/paged_kv.h"
#include "model/model_loader.h"

ABSL_FLAG(std::string, model, "", "Path of the GGUF model file (required)");
ABSL_FLAG(std::string, device, "cuda", "cuda | cpu (the CPU backend: wall times only)");
ABSL_FLAG(std::string, weights, "native",
          "Device weights: native | bf16 | auto, or two of them (native,bf16) to compare");
ABSL_FLAG(std::string, batch_sizes, "1,8,16,32,64,128,256", "Decode batch sizes, comma-separated");
ABSL_FLAG(int, context, 192, "Tokens each sequence holds before its decode token (>= 1)");
ABSL_FLAG(int, steps, 50, "Timed decode steps per batch size and graphs mode (>= 1)");
ABSL_FLAG(int, warmup, 5, "Untimed decode steps before them (>= 0)");
ABSL_FLAG(int, trace_steps, 8, "Steps traced with CUPTI per batch size and mode (0 = none)");
ABSL_FLAG(int, kernels_at, 64, "Batch size whose kernels are listed one by one (0 = none)");
ABSL_FLAG(std::string, timeline_out, "",
          "Append the last traced step at N = --kernels-at of every mode to this CSV file: one "
          "row a kernel or copy (start and end in us from the step's first, stream, CTAs)");
ABSL_FLAG(std::string, graphs, "both", "CUDA graphs: both (on, then off) | on | off");
ABSL_FLAG(int, max_batch_tokens, 2048, "Tokens per prefill step and the runner's workspace");
ABSL_FLAG(int, threads, 0, "CPU backend threads (0 = every core)");
ABSL_FLAG(int, prompt_len, 0,
          "0: decode steps; L > 0: prefill steps of N sequences x L new tokens each");
ABSL_FLAG(int, mixed_prompt_len, 0,
          "0: decode steps; L > 0: N decodes plus one L-token prompt a step");

namespace fb = flashserve::bench;
namespace fm = flashserve::model;

namespace {

struct Args {
  std::string model;
  fm::Device device = fm::Device::kCuda;
  std::vector<std::pair<std::string, fm::Weights>> weights;  // one or two formats
  std::vector<int> batch_sizes;
  int context = 0, steps = 0, warmup = 0, trace_steps = 0, max_batch_tokens = 0, threads = 0;
  int kernels_at = 0;
  std::string timeline_out;  // --timeline-out: "" for none
  int prompt_len = 0;  // 0: decode steps; > 0: prefill steps of N x prompt_len tokens
  int mixed_prompt_len = 0;  // > 0: N decodes plus one prompt of this many tokens a step
  std::vector<bool> graph_modes;  // one runner each: CUDA graphs on / off
};

[[noreturn]] void fail(const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", flashserve::program_name().c_str(), s.ToString().c_str());
  std::exit(1);
}

Args parse_args(int argc, char** argv) {
  flashserve::parse_command_line(
      argc, argv,
      "--model PATH [--device cuda|cpu] [--weights native,bf16] [--batch-sizes LIST] "
      "[--context N] [--steps N] [--warmup N] [--trace-steps N] [--kernels-at N] "
      "[--graphs both|on|off] "
      "[--max-batch-tokens N] [--threads N] [--prompt-len L] [--mixed-prompt-len L]");
  Args a;
  a.model = absl::GetFlag(FLAGS_model);
  if (a.model.empty()) flashserve::exit_with_usage("--model is required");
  const absl::StatusOr<fm::Device> device = fm::parse_device(absl::GetFlag(FLAGS_device));
  if (!device.ok() || *device == fm::Device::kAuto) {
    flashserve::exit_with_usage("--device must be cuda or cpu");
  }
  a.device = *device;
  for (const absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_weights), ',')) {
    const absl::StatusOr<fm::Weights> w = fm::parse_weights(std::string(item));
    if (!w.ok()) flashserve::exit_with_usage(w.status().message());
    a.weights.emplace_back(std::string(item), *w);
  }
  if (a.weights.size() > 2) flashserve::exit_with_usage("--weights: one or two formats");
  for (const absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_batch_sizes), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(item, &n) || n < 1) {
      flashserve::exit_with_usage(absl::StrCat("--batch-sizes: '", item, "' is not a count >= 1"));
    }
    a.batch_sizes.push_back(n);
  }
  a.context = absl::GetFlag(FLAGS_context);
  a.steps = absl::GetFlag(FLAGS_steps);
  a.warmup = absl::GetFlag(FLAGS_warmup);
  a.trace_steps = absl::GetFlag(FLAGS_trace_steps);
  a.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  a.threads = absl::GetFlag(FLAGS_threads);
  a.kernels_at = absl::GetFlag(FLAGS_kernels_at);
  a.timeline_out = absl::GetFlag(FLAGS_timeline_out);
  a.prompt_len = absl::GetFlag(FLAGS_prompt_len);
  a.mixed_prompt_len = absl::GetFlag(FLAGS_mixed_prompt_len);
  const std::string graphs = absl::GetFlag(FLAGS_graphs);
  if (graphs != "both" && graphs != "on" && graphs != "off") {
    flashserve::exit_with_usage(
        absl::StrCat("--graphs must be both, on or off, not '", graphs, "'"));
  }
  if (graphs != "off") a.graph_modes.push_back(true);
  if (graphs != "on" && a.device == fm::Device::kCuda) a.graph_modes.push_back(false);
  if (a.context < 1 || a.steps < 1 || a.max_batch_tokens < 1) {
    flashserve::exit_with_usage("--context, --steps and --max-batch-tokens must be >= 1");
  }
  if (a.warmup < 0 || a.trace_steps < 0 || a.threads < 0 || a.prompt_len < 0 ||
      a.mixed_prompt_len < 0) {
    flashserve::exit_with_usage(
        "--warmup, --trace-steps, --threads, --prompt-len and --mixed-prompt-len must be >= 0");
  }
  if (a.prompt_len > 0 && a.mixed_prompt_len > 0) {
    flashserve::exit_with_usage("--prompt-len and --mixed-prompt-len: one or the other");
  }
  for (const int n : a.batch_sizes) {
    if (a.mixed_prompt_len > 0 && int64_t{n} + a.mixed_prompt_len > a.max_batch_tokens) {
      flashserve::exit_with_usage(absl::StrCat("--mixed-prompt-len: ", n, " + ",
                                               a.mixed_prompt_len, " tokens exceed ",
                                               "--max-batch-tokens ", a.max_batch_tokens));
    }
  }
  if (a.prompt_len > 0) {
    a.context = a.prompt_len;  // the sequences hold their prompt, rewritten by every step
    for (const int n : a.batch_sizes) {
      if (int64_t{n} * a.prompt_len > a.max_batch_tokens) {
        flashserve::exit_with_usage(absl::StrCat("--prompt-len: ", n, " x ", a.prompt_len,
                                                 " tokens exceed --max-batch-tokens ",
                                                 a.max_batch_tokens));
      }
    }
  }
  return a;
}

// The sequences of one runner: sequence s owns KV blocks [s * blocks_per_seq, (s + 1) *
// blocks_per_seq), holds `context` prompt tokens and decodes at position `context`.
struct Sequences {
  int context = 0;
  int prompt_len = 0;  // > 0: the measured steps are prefills of this many tokens a sequence
  int mixed_prompt_len = 0;  // > 0: and one prompt of this many tokens, of sequence `extra`
  int extra = 0;             // the mixed steps' prompt sequence (after the decoding ones)
  int block_size = 0;
  int blocks_per_seq = 0;
  std::vector<int32_t> next_token;  // [num_seqs] the token each one feeds next
};

void add_block_table(const Sequences& q, int s, fm::ForwardBatch* b) {
  for (int j = 0; j < q.blocks_per_seq; ++j) b->block_tables.push_back(s * q.blocks_per_seq + j);
}

int32_t slot_of(const Sequences& q, int s, int position) {
  return (s * q.blocks_per_seq + position / q.block_size) * q.block_size + position % q.block_size;
}

// The decode step of sequences [0, n): one token each at position `context`, all sampled
// greedily.
fm::ForwardBatch decode_batch(const Sequences& q, int n) {
  fm::ForwardBatch b;
  b.max_blocks_per_seq = q.blocks_per_seq;
  b.cu_seqlens_q.push_back(0);
  for (int s = 0; s < n; ++s) {
    b.token_ids.push_back(q.next_token[s]);
    b.positions.push_back(q.context);
    b.cu_seqlens_q.push_back(s + 1);
    b.seqlens_k.push_back(q.context + 1);
    add_block_table(q, s, &b);
    b.slot_mapping.push_back(slot_of(q, s, q.context));
    b.sample_seqs.push_back(s);
    b.sample_specs.push_back(flashserve::kernels::SampleSpec{});
  }
  return b;
}

// The prefill step of sequences [0, n): q.prompt_len tokens each at positions 0 .. prompt_len
// - 1 (their ids derived from the sequence's next token, so steps differ), the last sampled.
fm::ForwardBatch prefill_batch(const Sequences& q, int n) {
  fm::ForwardBatch b;
  b.max_blocks_per_seq = q.blocks_per_seq;
  b.cu_seqlens_q.push_back(0);
  for (int s = 0; s < n; ++s) {
    for (int p = 0; p < q.prompt_len; ++p) {
      b.token_ids.push_back(p == 0 ? q.next_token[s] : (q.next_token[s] + 7 * p) % 256);
      b.positions.push_back(p);
      b.slot_mapping.push_back(slot_of(q, s, p));
    }
    b.cu_seqlens_q.push_back(b.num_tokens());
    b.seqlens_k.push_back(q.prompt_len);
    add_block_table(q, s, &b);
    b.sample_seqs.push_back(s);
    b.sample_specs.push_back(flashserve::kernels::SampleSpec{});
  }
  return b;
}

// The decode step of sequences [0, n) plus sequence q.extra's q.mixed_prompt_len-token
// prompt (ids derived from its next token, so steps differ), its last token sampled.
fm::ForwardBatch mixed_batch(const Sequences& q, int n) {
  fm::ForwardBatch b = decode_batch(q, n);
  const int32_t first = q.next_token[q.extra];
  for (int p = 0; p < q.mixed_prompt_len; ++p) {
    b.token_ids.push_back(p == 0 ? first : (first + 7 * p) % 256);
    b.positions.push_back(p);
    b.slot_mapping.push_back(slot_of(q, q.extra, p));
  }
  b.cu_seqlens_q.push_back(b.num_tokens());
  b.seqlens_k.push_back(q.mixed_prompt_len);
  add_block_table(q, q.extra, &b);
  b.sample_seqs.push_back(n);
  b.sample_specs.push_back(flashserve::kernels::SampleSpec{});
  return b;
}

// The measured step of sequences [0, n): a decode step, with q.prompt_len a prefill step, with
// q.mixed_prompt_len a decode step with one prompt beside it.
fm::ForwardBatch step_batch(const Sequences& q, int n) {
  if (q.mixed_prompt_len > 0) return mixed_batch(q, n);
  return q.prompt_len > 0 ? prefill_batch(q, n) : decode_batch(q, n);
}

// The sequence of each of step_batch(q, n)'s batch sequences.
std::vector<int> step_sequences(const Sequences& q, int n) {
  std::vector<int> seq_of(n);
  for (int s = 0; s < n; ++s) seq_of[s] = s;
  if (q.mixed_prompt_len > 0) seq_of.push_back(q.extra);
  return seq_of;
}

// Runs `batch` and stores each sampled token as its sequence's next one (`seq_of[i]`: the
// sequence of batch sequence i).
absl::Status run(fm::ModelRunner& runner, const fm::ForwardBatch& batch,
                 const std::vector<int>& seq_of, Sequences* q) {
  std::vector<fm::SampledToken> sampled;
  RETURN_IF_ERROR(runner.forward(batch, &sampled, nullptr));
  for (size_t i = 0; i < sampled.size(); ++i) {
    q->next_token[seq_of[batch.sample_seqs[i]]] = sampled[i].token;
  }
  return absl::OkStatus();
}

// Prefills num_seqs prompts of q->context random ids, in steps of up to max_tokens tokens
// (a prompt longer than that in chunks), sampling each prompt's first token.
absl::Status prefill(fm::ModelRunner& runner, int num_seqs, int max_tokens, Sequences* q) {
  const int vocab = runner.config().vocab_size;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  fm::ForwardBatch b;
  std::vector<int> seq_of;
  const auto flush = [&]() -> absl::Status {
    if (b.token_ids.empty()) return absl::OkStatus();
    RETURN_IF_ERROR(run(runner, b, seq_of, q));
    b = fm::ForwardBatch{};
    seq_of.clear();
    return absl::OkStatus();
  };
  for (int s = 0; s < num_seqs; ++s) {
    for (int p0 = 0; p0 < q->context;) {
      if (b.num_tokens() == max_tokens) RETURN_IF_ERROR(flush());
      const int p1 = std::min(q->context, p0 + max_tokens - b.num_tokens());
      if (b.cu_seqlens_q.empty()) b.cu_seqlens_q.push_back(0);
      b.max_blocks_per_seq = q->blocks_per_seq;
      for (int p = p0; p < p1; ++p) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        b.token_ids.push_back(static_cast<int32_t>((state >> 33) % vocab));
        b.positions.push_back(p);
        b.slot_mapping.push_back(slot_of(*q, s, p));
      }
      b.cu_seqlens_q.push_back(b.num_tokens());
      b.seqlens_k.push_back(p1);
      add_block_table(*q, s, &b);
      if (p1 == q->context) {
        b.sample_seqs.push_back(b.num_seqs() - 1);
        b.sample_specs.push_back(flashserve::kernels::SampleSpec{});
      }
      seq_of.push_back(s);
      p0 = p1;
    }
  }
  return flush();
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// `count` decode steps of sequences [0, n), their wall times appended to *wall.
absl::Status timed_steps(fm::ModelRunner& runner, int n, int count, Sequences* q,
                         std::vector<double>* wall) {
  const std::vector<int> seq_of = step_sequences(*q, n);
  for (int i = 0; i < count; ++i) {
    const fm::ForwardBatch batch = step_batch(*q, n);
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(run(runner, batch, seq_of, q));
    if (wall != nullptr) wall->push_back(seconds_since(t0));
  }
  return absl::OkStatus();
}

// The activities of one traced step as CSV rows under `label`, appended to `path`: where the
// kernels of a captured graph's branches overlap (stream ids differ) and where the GPU idles.
absl::Status append_timeline(const std::string& path, const std::string& label,
                             std::vector<fb::GpuActivity> step) {
  if (step.empty()) return absl::OkStatus();
  std::sort(step.begin(), step.end(), [](const fb::GpuActivity& x, const fb::GpuActivity& y) {
    return x.start_ns < y.start_ns;
  });
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--timeline-out: cannot open ", path));
  }
  const uint64_t t0 = step.front().start_ns;
  for (const fb::GpuActivity& x : step) {
    std::fprintf(f, "%s,%.3f,%.3f,%u,%u,\"%s\"\n", label.c_str(), (x.start_ns - t0) * 1e-3,
                 (x.end_ns - t0) * 1e-3, x.stream, x.grid_ctas, x.name.c_str());
  }
  return std::fclose(f) == 0 ? absl::OkStatus()
                             : absl::InternalError(absl::StrCat("--timeline-out: writing ", path));
}

// `count` decode steps under the trace: each step's activities (those that start within its
// forward() call) broken down, its enqueue time (until its last cudaStreamSynchronize).
// *trace_failed says whether an error came from the trace rather than from the runner;
// *last_step (when not null) gets the last step's activities.
absl::Status traced_steps(fm::ModelRunner& runner, int n, int count, Sequences* q,
                          fb::KernelTrace& trace, fb::TracedSteps* out, bool* trace_failed,
                          std::vector<fb::GpuActivity>* last_step) {
  const std::vector<int> seq_of = step_sequences(*q, n);
  std::vector<std::pair<uint64_t, uint64_t>> windows;
  std::vector<fb::GpuActivity> activities;
  std::vector<uint64_t> syncs;
  *trace_failed = true;
  RETURN_IF_ERROR(trace.start());
  for (int i = 0; i < count; ++i) {
    const fm::ForwardBatch batch = step_batch(*q, n);
    const uint64_t t0 = trace.now_ns();
    if (absl::Status s = run(runner, batch, seq_of, q); !s.ok()) {
      *trace_failed = false;
      trace.stop(&activities, &syncs).IgnoreError();  // the runner's error is the one to report
      return s;
    }
    windows.emplace_back(t0, trace.now_ns());
  }
  RETURN_IF_ERROR(trace.stop(&activities, &syncs));
  *trace_failed = false;
  for (const auto& [t0, t1] : windows) {
    out->steps.push_back(fb::break_down_step(fb::activities_between(activities, t0, t1)));
    out->wall.push_back((t1 - t0) * 1e-9);
    uint64_t enqueued = t1;
    for (const uint64_t s : syncs) {
      if (s >= t0 && s < t1) enqueued = s;  // the step's last sync: after everything enqueued
    }
    out->enqueue.push_back((enqueued - t0) * 1e-9);
  }
  if (last_step != nullptr && !windows.empty()) {
    *last_step = fb::activities_between(activities, windows.back().first, windows.back().second);
  }
  return absl::OkStatus();
}

fm::LoadOptions load_options(const Args& a, fm::Weights weights, bool graphs, int num_blocks) {
  fm::LoadOptions o;
  o.device = a.device;
  o.weights = weights;
  o.cuda_graphs = graphs;
  o.num_kv_blocks = num_blocks;
  o.max_num_seqs = *std::max_element(a.batch_sizes.begin(), a.batch_sizes.end()) +
                   (a.mixed_prompt_len > 0 ? 1 : 0);
  o.max_batch_tokens = a.max_batch_tokens;
  o.num_threads = a.threads;
  return o;
}

// One runner (graphs on or off): load, prefill, then per batch size the timed and the
// traced steps.
absl::Status measure_mode(const Args& a, fm::Weights weights, bool graphs,
                          fb::KernelTrace*& trace, fb::Results* r) {
  const int max_seqs = *std::max_element(a.batch_sizes.begin(), a.batch_sizes.end());
  Sequences q;
  q.context = a.context;
  q.prompt_len = a.prompt_len;
  q.mixed_prompt_len = a.mixed_prompt_len;
  q.extra = max_seqs;
  const int num_seqs = max_seqs + (a.mixed_prompt_len > 0 ? 1 : 0);
  q.block_size = flashserve::kernels::kKvBlockSize;  // both backends' (checked below)
  q.blocks_per_seq =
      (std::max(a.context + 1, a.mixed_prompt_len) + q.block_size - 1) / q.block_size;
  ASSIGN_OR_RETURN(fm::LoadedModel m,
                   fm::load_model(a.model, load_options(a, weights, graphs,
                                                        num_seqs * q.blocks_per_seq)));
  if (m.runner->kv_block_size() != q.block_size) {
    return absl::InternalError(absl::StrCat("runner's KV block is ", m.runner->kv_block_size(),
                                            " tokens, the benchmark assumed ", q.block_size));
  }
  const char* mode = a.device == fm::Device::kCpu ? "" : graphs ? "graphs on: " : "graphs off: ";
  r->summary.push_back(absl::StrCat(mode, m.backend_summary));
  q.next_token.assign(num_seqs, 0);
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(prefill(*m.runner, max_seqs, a.max_batch_tokens, &q));
  std::fprintf(stderr, "prefilled %d x %d tokens in %.1f s (%s)\n", max_seqs, a.context,
               seconds_since(t0), r->summary.back().substr(0, r->summary.back().find(':')).c_str());
  for (const int n : a.batch_sizes) {
    fb::ModeRow& row = r->rows[n][graphs ? 0 : 1];
    RETURN_IF_ERROR(timed_steps(*m.runner, n, a.warmup, &q, nullptr));
    const std::string range = absl::StrCat("decode N=", n);
    fb::push_range(range.c_str());
    const absl::Status timed = timed_steps(*m.runner, n, a.steps, &q, &row.wall);
    fb::pop_range();
    RETURN_IF_ERROR(timed);
    if (trace != nullptr && a.trace_steps > 0) {
      // A trace that fails (another profiler holds CUPTI) leaves the wall times standing.
      bool trace_failed = false;
      const bool timeline = n == a.kernels_at && !a.timeline_out.empty();
      std::vector<fb::GpuActivity> last_step;
      const absl::Status s = traced_steps(*m.runner, n, a.trace_steps, &q, *trace, &row.traced,
                                          &trace_failed, timeline ? &last_step : nullptr);
      if (!s.ok() && !trace_failed) return s;
      if (s.ok() && timeline) {
        RETURN_IF_ERROR(append_timeline(
            a.timeline_out,
            absl::StrCat(r->label, graphs ? " graphs on" : " graphs off", " N=", n),
            std::move(last_step)));
      }
      if (!s.ok()) {
        std::fprintf(stderr, "no kernel breakdown from here on: %s\n", s.ToString().c_str());
        row.traced = fb::TracedSteps{};
        trace = nullptr;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  if (absl::Status s = fm::check_device_available(a.device); !s.ok()) fail(s);
  std::unique_ptr<fb::KernelTrace> trace;
  if (a.device == fm::Device::kCuda && a.trace_steps > 0) {
    absl::StatusOr<std::unique_ptr<fb::KernelTrace>> t = fb::KernelTrace::create();
    if (t.ok()) {
      trace = std::move(*t);
    } else {
      std::fprintf(stderr, "no kernel breakdown: %s\n", t.status().ToString().c_str());
    }
  }
  fb::KernelTrace* tracing = trace.get();
  std::vector<fb::Results> results;
  for (const auto& [name, weights] : a.weights) {
    fb::Results& r = results.emplace_back();
    r.label = "weights " + name;
    r.title = a.prompt_len > 0
                  ? absl::StrFormat("%s, prefill steps of N x %d new tokens, %d timed steps",
                                    a.model, a.prompt_len, a.steps)
              : a.mixed_prompt_len > 0
                  ? absl::StrFormat("%s, context %d, steps of N decodes + one %d-token prompt, "
                                    "%d timed steps",
                                    a.model, a.context, a.mixed_prompt_len, a.steps)
                  : absl::StrFormat("%s, context %d, %d timed steps", a.model, a.context, a.steps);
    r.device = a.device == fm::Device::kCuda ? "cuda" : "cpu";
    r.kernel_table_n = a.kernels_at;
    for (const bool graphs : a.graph_modes) {
      if (absl::Status s = measure_mode(a, weights, graphs, tracing, &r); !s.ok()) fail(s);
    }
    std::fputs(fb::format_tables(r).c_str(), stdout);
    std::fflush(stdout);
  }
  if (results.size() == 2) {
    std::fputs(fb::format_difference(results[0], results[1]).c_str(), stdout);
  }
  return 0;
}
