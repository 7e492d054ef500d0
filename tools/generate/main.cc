// flashserve-generate --model PATH --prompt TEXT [--max-tokens N] [--temperature T]
//                     [--seed S] [--chat] [--threads N]
// Loads the model (model/model_loader.h), encodes the prompt (rendered with the model's chat
// template under --chat), runs it as one request through the engine in-process
// (tools/generate/generate.h) and prints the text as it is produced; timings go to stderr.
// Generation stops at max-tokens or an end-of-generation token.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "model/model_loader.h"
#include "model/sampling.h"
#include "tools/generate/generate.h"

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
  flashserve::tools::GenerateOptions request;
  request.prompt_tokens = encode_prompt(m, args);
  request.max_new_tokens = args.max_tokens;
  request.sampling.temperature = args.temperature;
  request.sampling.seed = args.seed;
  request.sampling.has_seed = args.has_seed;
  auto result = flashserve::tools::generate(std::move(m.runner), *m.tokenizer, request,
                                            [](std::string_view text) {
                                              std::fwrite(text.data(), 1, text.size(), stdout);
                                              std::fflush(stdout);
                                            });
  if (!result.ok()) {
    std::fprintf(stderr, "\nflashserve-generate: %s\n",
                 std::string(result.status().message()).c_str());
    return 1;
  }
  std::fputc('\n', stdout);
  std::fprintf(stderr,
               "[prompt %zu tokens; first token after %.1f ms; %zu tokens in %.1f ms; %s]\n",
               request.prompt_tokens.size(), result->timings.time_to_first_token * 1e3,
               result->token_ids.size(), result->timings.total_seconds * 1e3,
               std::string(flashserve::engine::finish_reason_name(result->finish_reason)).c_str());
  return 0;
}
