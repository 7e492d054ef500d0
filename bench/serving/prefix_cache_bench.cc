// flashserve-bench-prefix-cache --model PATH [--requests 64] [--system-tokens 1024]
//     [--turn-tokens 32] [--max-new-tokens 1] [--threads N] [--max-batch-tokens 2048]
//
// Requests that share one system prompt, each followed by its own user turn, submitted at
// once to an engine over the real model runner — once with the prefix cache off, once on,
// in the same process. Nothing is warmed up: with the cache on, the first requests compute
// the system prompt and the later ones find it cached. Prints a Markdown table: time to
// first token (p50, p90, max), wall time, prompt tokens computed (prefill) and tokens
// reused from the cache, per mode, then the p50 ratio. Outputs are checked to be identical
// between the modes (greedy), so the speed-up is not bought with different results.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "base/command_line.h"
#include "model/model_loader.h"
#include "server/engine/engine.h"
#include "server/metrics/metrics.h"

ABSL_FLAG(std::string, model, "", "Path of the GGUF model file (required)");
ABSL_FLAG(int, requests, 64, "Requests, all submitted at once (>= 1)");
ABSL_FLAG(int, system_tokens, 1024, "Tokens of the shared system prompt (>= 1)");
ABSL_FLAG(int, turn_tokens, 32, "Tokens of each request's own user turn (>= 1)");
ABSL_FLAG(int, max_new_tokens, 1, "Tokens generated per request (>= 1)");
ABSL_FLAG(int, threads, 0, "CPU backend threads (0 = the BLAS default)");
ABSL_FLAG(int, max_batch_tokens, 2048, "Tokens per engine step (>= 1)");

namespace fe = flashserve::engine;
namespace fm = flashserve::model;

namespace {

// The flags' values.
struct Args {
  std::string model;
  int requests = 0;
  int system_tokens = 0;
  int turn_tokens = 0;
  int max_new_tokens = 0;
  int threads = 0;
  int max_batch_tokens = 0;
};

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "flashserve-bench-prefix-cache: %s\n", why.c_str());
  std::exit(1);
}

Args parse_args(int argc, char** argv) {
  flashserve::parse_command_line(
      argc, argv,
      "--model PATH [--requests N] [--system-tokens N] [--turn-tokens N] [--max-new-tokens N] "
      "[--threads N] [--max-batch-tokens N]");
  const Args a{.model = absl::GetFlag(FLAGS_model),
               .requests = absl::GetFlag(FLAGS_requests),
               .system_tokens = absl::GetFlag(FLAGS_system_tokens),
               .turn_tokens = absl::GetFlag(FLAGS_turn_tokens),
               .max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens),
               .threads = absl::GetFlag(FLAGS_threads),
               .max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens)};
  if (a.model.empty()) flashserve::exit_with_usage("--model is required");
  for (const int n : {a.requests, a.system_tokens, a.turn_tokens, a.max_new_tokens,
                      a.max_batch_tokens}) {
    if (n < 1) {
      flashserve::exit_with_usage("--requests, --system-tokens, --turn-tokens, "
                                  "--max-new-tokens and --max-batch-tokens must be >= 1");
    }
  }
  if (a.threads < 0) flashserve::exit_with_usage("--threads must be >= 0");
  return a;
}

// `n` token ids of English text: `text` tokenized and repeated as needed.
std::vector<int32_t> tokens_of(const fm::Tokenizer& tok, const std::string& text, int n,
                               bool add_bos) {
  const std::vector<int32_t> piece = tok.encode(text, false, false);
  std::vector<int32_t> out;
  if (add_bos && tok.adds_bos()) out.push_back(tok.bos_id());
  while (static_cast<int>(out.size()) < n) {
    out.insert(out.end(), piece.begin(), piece.end());
  }
  out.resize(n);
  return out;
}

std::vector<std::vector<int32_t>> make_prompts(const fm::Tokenizer& tok, const Args& a) {
  const std::vector<int32_t> system = tokens_of(
      tok,
      " You are a helpful assistant for a small library. Answer questions about opening "
      "hours, borrowing rules, late fees and the reading room politely and briefly.",
      a.system_tokens, /*add_bos=*/true);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < a.requests; ++i) {
    std::vector<int32_t> p = system;
    const std::vector<int32_t> turn = tokens_of(
        tok, absl::StrFormat(" Question %d: may I borrow %d books at once for %d days?", i,
                             i % 7 + 2, i + 3),
        a.turn_tokens, /*add_bos=*/false);
    p.insert(p.end(), turn.begin(), turn.end());
    prompts.push_back(std::move(p));
  }
  return prompts;
}

// The value of the unlabelled metric `name` in the Prometheus text; 0 when absent.
double metric(const std::string& text, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return 0;
  return std::strtod(text.c_str() + at + key.size(), nullptr);
}

struct Outcome {
  std::vector<double> ttft;                 // seconds, one per request
  std::vector<std::vector<int32_t>> tokens;  // per request
  double wall_seconds = 0;
  double prefill_tokens = 0;
  double hit_tokens = 0;
};

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

Outcome run_mode(const Args& a, bool prefix_caching) {
  fm::LoadOptions load;
  load.num_threads = a.threads;
  load.max_num_seqs = a.requests;
  load.max_batch_tokens = a.max_batch_tokens;
  absl::StatusOr<fm::LoadedModel> m = fm::load_model(a.model, load);
  if (!m.ok()) fail(m.status().ToString());
  const std::vector<std::vector<int32_t>> prompts = make_prompts(*m->tokenizer, a);
  flashserve::metrics::Metrics metrics;
  fe::EngineOptions options;
  options.max_num_seqs = a.requests;
  options.max_batch_tokens = a.max_batch_tokens;
  options.max_waiting = a.requests;
  options.prefix_caching = prefix_caching;
  fe::Engine engine(std::move(m->runner), *m->tokenizer, options, &metrics);

  absl::Mutex mu;
  Outcome out;
  out.ttft.assign(prompts.size(), 0);
  out.tokens.assign(prompts.size(), {});
  int num_done = 0;
  const auto begin = std::chrono::steady_clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    fe::GenerationRequest r;
    r.prompt_tokens = prompts[i];
    r.max_new_tokens = a.max_new_tokens;
    r.sampling.temperature = 0;
    r.ignore_eos = true;
    auto got = engine.submit(std::move(r), [&, i](fe::GenerationEvent e) {
      absl::MutexLock lock(&mu);
      out.tokens[i].insert(out.tokens[i].end(), e.token_ids.begin(), e.token_ids.end());
      if (!e.finished) return;
      if (!e.status.ok()) fail("request failed: " + e.status.ToString());
      out.ttft[i] = e.timings.time_to_first_token;
      ++num_done;
    });
    if (!got.ok()) fail("submit: " + got.status().ToString());
  }
  engine.start();
  {
    const int num_requests = static_cast<int>(prompts.size());
    const auto all_done = [&]() { return num_done == num_requests; };
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&all_done));
  }
  out.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const std::string text = metrics.serialize();
  // Every batch token is a prompt token (prefill) or a decode of a generated token; the last
  // generated token of each request is never fed back.
  double num_decodes = 0;
  for (const auto& t : out.tokens) num_decodes += static_cast<double>(t.size()) - 1;
  out.prefill_tokens = metric(text, "flashserve_batch_tokens_sum") - num_decodes;
  out.hit_tokens = metric(text, "flashserve_prefix_cache_hit_tokens_total");
  return out;
}

void print_row(const char* mode, const Outcome& o) {
  std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f |\n", mode,
              percentile(o.ttft, 0.5), percentile(o.ttft, 0.9), percentile(o.ttft, 1.0),
              o.wall_seconds, o.prefill_tokens, o.hit_tokens);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  const Outcome off = run_mode(a, /*prefix_caching=*/false);
  const Outcome on = run_mode(a, /*prefix_caching=*/true);
  int num_same = 0;
  for (size_t i = 0; i < on.tokens.size(); ++i) num_same += on.tokens[i] == off.tokens[i];
  std::printf("%d requests: %d-token system prompt + %d-token user turn, max_new_tokens %d, "
              "max_batch_tokens %d, all submitted at once\n\n",
              a.requests, a.system_tokens, a.turn_tokens, a.max_new_tokens, a.max_batch_tokens);
  std::printf("| prefix cache | TTFT p50 (s) | TTFT p90 (s) | TTFT max (s) | wall (s) | "
              "prompt tokens computed | prompt tokens reused |\n|---|---|---|---|---|---|---|\n");
  print_row("off", off);
  print_row("on", on);
  std::printf("\nTTFT p50 off/on: %.1fx; greedy outputs identical in %d of %zu requests\n",
              percentile(off.ttft, 0.5) / percentile(on.ttft, 0.5), num_same, on.tokens.size());
  return num_same == static_cast<int>(on.tokens.size()) ? 0 : 1;
}
