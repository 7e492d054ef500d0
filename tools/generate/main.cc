// flashserve-generate --model PATH --prompt TEXT [--max-tokens N] [--temperature T]
//                     [--seed S] [--chat] [--threads N]
// Loads the model (model/model_loader.h), encodes the prompt (rendered with the model's chat
// template under --chat), generates one sequence with the model runner and prints the text
// as it is produced; timings go to stderr. Generation stops at max-tokens or an
// end-of-generation token.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "model/text/detokenizer.h"
#include "model/model_loader.h"
#include "model/sampling.h"

namespace fm = flashserve::model;

namespace {

struct Args {
  std::string model;
  std::string prompt;
  int max_tokens = 64;
  float temperature = 0;
  uint64_t seed = 0;
  bool has_seed = false;
  bool chat = false;
  int threads = 0;
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "flashserve-generate: %s\nusage: flashserve-generate --model PATH --prompt TEXT "
               "[--max-tokens N] [--temperature T] [--seed S] [--chat] [--threads N]\n",
               error.c_str());
  std::exit(2);
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--chat") {
      a.chat = true;
      continue;
    }
    if (i + 1 >= argc) usage("missing value after " + flag);
    const std::string value = argv[++i];
    bool ok = true;
    if (flag == "--model") a.model = value;
    else if (flag == "--prompt") a.prompt = value;
    else if (flag == "--max-tokens") ok = absl::SimpleAtoi(value, &a.max_tokens) && a.max_tokens >= 1;
    else if (flag == "--temperature") ok = absl::SimpleAtof(value, &a.temperature) && a.temperature >= 0;
    else if (flag == "--seed") ok = a.has_seed = absl::SimpleAtoi(value, &a.seed);
    else if (flag == "--threads") ok = absl::SimpleAtoi(value, &a.threads) && a.threads >= 0;
    else usage("unknown flag " + flag);
    if (!ok) usage("bad value '" + value + "' for " + flag);
  }
  if (a.model.empty() || a.prompt.empty()) usage("--model and --prompt are required");
  return a;
}

// The prompt's token ids: raw text, or the chat template's rendering of one user message.
std::vector<int32_t> encode_prompt(const fm::LoadedModel& m, const Args& args) {
  std::string text = args.prompt;
  if (args.chat) {
    if (!m.chat_template) usage("--chat: the model file has no chat template");
    const fm::ChatMessage message{"user", args.prompt};
    auto rendered = m.chat_template->render({&message, 1}, /*add_generation_prompt=*/true);
    if (!rendered.ok()) usage(std::string(rendered.status().message()));
    text = *rendered;
  }
  return m.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/args.chat);
}

// One sequence's step: `tokens` appended at position `num_cached` in blocks 0, 1, ...
// Slots equal positions because the sequence owns every block, in order.
fm::ForwardBatch make_step(std::span<const int32_t> tokens, int num_cached, int num_blocks) {
  fm::ForwardBatch b;
  const int len = num_cached + static_cast<int>(tokens.size());
  b.max_blocks_per_seq = num_blocks;
  for (int i = 0; i < num_blocks; ++i) b.block_tables.push_back(i);
  for (size_t i = 0; i < tokens.size(); ++i) {
    b.token_ids.push_back(tokens[i]);
    b.positions.push_back(num_cached + static_cast<int>(i));
    b.slot_mapping.push_back(num_cached + static_cast<int>(i));
  }
  b.cu_seqlens_q = {0, static_cast<int32_t>(tokens.size())};
  b.seqlens_k = {len};
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  fm::LoadOptions options;
  options.num_threads = args.threads;
  auto loaded = fm::load_model(args.model, options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "flashserve-generate: %s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  fm::LoadedModel& m = *loaded;
  fm::ModelRunner& runner = *m.runner;
  const std::vector<int32_t> prompt = encode_prompt(m, args);
  const int capacity = runner.num_kv_blocks() * runner.kv_block_size();
  const int max_tokens = std::min<int>(args.max_tokens, capacity - static_cast<int>(prompt.size()));
  if (prompt.empty() || max_tokens < 1) usage("prompt is empty or does not fit the KV cache");

  fm::SamplingParams params;
  params.temperature = args.temperature;
  params.seed = args.seed;
  params.has_seed = args.has_seed;
  if (auto st = fm::validate(params); !st.ok()) usage(std::string(st.message()));
  fm::Sampler sampler(params, /*fallback_seed=*/0);
  fm::IncrementalDetokenizer detok(*m.tokenizer);

  using Clock = std::chrono::steady_clock;
  std::vector<int32_t> generated;
  std::vector<fm::SampledToken> sampled;
  std::span<const int32_t> step_tokens = prompt;
  int num_cached = 0;
  double prefill_s = 0, decode_s = 0;
  int num_decode = 0;
  while (static_cast<int>(generated.size()) < max_tokens) {
    const auto start = Clock::now();
    fm::ForwardBatch batch = make_step(step_tokens, num_cached, runner.num_kv_blocks());
    batch.sample_seqs = {0};
    batch.sample_specs = {sampler.next_spec(prompt, generated, m.config.vocab_size,
                                            &batch.penalty_tokens, &batch.penalty_counts)};
    if (auto st = runner.forward(batch, &sampled, nullptr); !st.ok()) {
      std::fprintf(stderr, "flashserve-generate: %s\n", std::string(st.message()).c_str());
      return 1;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (num_cached == 0) {
      prefill_s = seconds;
    } else {
      decode_s += seconds;
      ++num_decode;
    }
    num_cached += static_cast<int>(step_tokens.size());
    const int32_t token = sampled[0].token;
    if (m.tokenizer->is_end_of_generation(token)) break;
    generated.push_back(token);
    std::fputs(detok.push(token).c_str(), stdout);
    std::fflush(stdout);
    step_tokens = std::span<const int32_t>(&generated.back(), 1);
  }
  std::fputs(detok.flush().c_str(), stdout);
  std::fputc('\n', stdout);
  std::fprintf(stderr, "[prompt %zu tokens: %.1f ms; %d decode steps: %.1f ms/token]\n",
               prompt.size(), prefill_s * 1e3, num_decode,
               num_decode > 0 ? decode_s * 1e3 / num_decode : 0.0);
  return 0;
}
