// llama-bench's figures for flashserve's CPU backend, measured the way llama-bench measures
// them (ggml-org/llama.cpp:tools/llama-bench/llama-bench.cpp): pp = one prefill of
// --prompt-tokens tokens into an empty cache, tg = --gen-tokens tokens decoded one step at a
// time from an empty cache, each repeated --repetitions times after one warm-up run; tokens/s as the mean and
// the standard deviation over repetitions. Token ids are fixed, arbitrary ids (the speed does
// not depend on them). Also prints the resident memory (VmRSS) right after load.
//   flashserve-cpu-bench --model models/SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 \
//       [--weights auto|bf16] [--prompt-tokens 512] [--gen-tokens 128] [--repetitions 5]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "base/command_line.h"
#include "model/model_loader.h"
#include "model/runner.h"
#include "tests/support/forward_test_util.h"

ABSL_FLAG(std::string, model, "", "Path of the GGUF model file (required)");
ABSL_FLAG(int, threads, 0, "CPU backend threads (0 = every core)");
ABSL_FLAG(std::string, weights, "auto", "auto (quantized products) | bf16 (fp32 reference)");
ABSL_FLAG(int, prompt_tokens, 512, "pp: tokens of the one prefill");
ABSL_FLAG(int, gen_tokens, 128, "tg: tokens decoded one at a time");
ABSL_FLAG(int, repetitions, 5, "Repetitions of each test");

namespace fm = flashserve::model;
namespace ft = flashserve::testing;

namespace {

std::string vm_rss() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return line.substr(6);
  }
  return "?";
}

// Seconds of one run: a fresh sequence (blocks from 0), `prefill` tokens in one step, then
// `decode` single-token steps.
double timed_run(fm::LogitsRunner* runner, const fm::ModelConfig& c, int block_size,
                 int prefill, int decode) {
  ft::TestSequence seq;
  for (int b = 0; b * block_size < prefill + decode + 1; ++b) seq.blocks.push_back(b);
  std::vector<int32_t> ids(prefill + decode);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((1000 + 37 * i) % c.vocab_size);
  std::vector<float> logits;
  auto step = [&](std::span<const int32_t> tokens) {
    fm::ForwardBatch batch;
    ft::add_to_batch(&seq, tokens, block_size, &batch);
    ft::TestSequence* seqs[] = {&seq};
    ft::finish_batch(seqs, &batch);
    const absl::Status s = runner->forward_logits(batch, c.num_layers, &logits);
    if (!s.ok()) std::fprintf(stderr, "forward: %s\n", std::string(s.message()).c_str());
  };
  const auto start = std::chrono::steady_clock::now();
  if (prefill > 0) step(std::span(ids).first(prefill));
  for (int i = 0; i < decode; ++i) step(std::span(ids).subspan(prefill + i, 1));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void report(const char* test, int tokens, const std::vector<double>& seconds) {
  double mean = 0, var = 0;
  for (double s : seconds) mean += tokens / s / seconds.size();
  for (double s : seconds) var += (tokens / s - mean) * (tokens / s - mean) / seconds.size();
  std::printf("%-6s %8.2f +- %.2f tokens/s\n", test, mean, std::sqrt(var));
}

}  // namespace

int main(int argc, char** argv) {
  flashserve::parse_command_line(argc, argv, "flashserve-cpu-bench --model PATH [--threads N]");
  fm::LoadOptions o;
  o.device = fm::Device::kCpu;
  o.num_threads = absl::GetFlag(FLAGS_threads);
  const int pp = absl::GetFlag(FLAGS_prompt_tokens), tg = absl::GetFlag(FLAGS_gen_tokens);
  o.kv_cache_tokens = pp + tg + 64;
  auto weights = fm::parse_weights(absl::GetFlag(FLAGS_weights));
  if (!weights.ok()) {
    std::fprintf(stderr, "%s\n", std::string(weights.status().message()).c_str());
    return 2;
  }
  o.weights = *weights;
  auto m = fm::load_model(absl::GetFlag(FLAGS_model), o);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", std::string(m.status().message()).c_str());
    return 1;
  }
  std::printf("%s\nVmRSS after load:%s\n", m->backend_summary.c_str(), vm_rss().c_str());
  fm::LogitsRunner* runner = ft::logits_runner(m->runner.get());
  const int bs = m->runner->kv_block_size();
  std::vector<double> pp_s, tg_s;
  timed_run(runner, m->config, bs, pp, 1);  // warm-up
  for (int r = 0; r < absl::GetFlag(FLAGS_repetitions); ++r) {
    pp_s.push_back(timed_run(runner, m->config, bs, pp, 0));
    tg_s.push_back(timed_run(runner, m->config, bs, 0, tg));
  }
  report(("pp" + std::to_string(pp)).c_str(), pp, pp_s);
  report(("tg" + std::to_string(tg)).c_str(), tg, tg_s);
  std::printf("VmRSS at exit:%s\n", vm_rss().c_str());
  return 0;
}
