// flashserve-generate --model PATH --prompt TEXT [--max-tokens N] [--temperature T]
//                     [--seed S] [--chat] [--threads N] [--device auto|cpu|cuda] [--weights auto|native|bf16]
// Loads the model (model/model_loader.h), encodes the prompt (rendered with the model's chat
// template under --chat), runs it as one request through the engine in-process
// (tools/generate/generate.h) and prints the text as it is produced; timings go to stderr.
// Generation stops at max-tokens or an end-of-generation token.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "base/command_line.h"
#include "model/model_loader.h"
#include "model/sampling.h"
#include "model/step_budget.h"
#include "tools/generate/generate.h"

ABSL_FLAG(std::string, model, "", "Path of the GGUF model file (required)");
ABSL_FLAG(std::string, prompt, "", "The prompt text (required)");
ABSL_FLAG(int, max_tokens, 64, "Tokens to generate at most (>= 1)");
ABSL_FLAG(float, temperature, 0, "Sampling temperature (0 = greedy)");
ABSL_FLAG(std::optional<uint64_t>, seed, std::nullopt,
          "Sampling seed (default: a seed of the engine's choosing)");
ABSL_FLAG(bool, chat, false, "Render the prompt as one user message with the chat template");
ABSL_FLAG(int, threads, 0, "CPU backend threads (0 = every core)");
ABSL_FLAG(std::string, device, "auto", "auto | cpu | cuda");
ABSL_FLAG(std::string, weights, "auto",
          "auto | native (quantized matrices in their block format) | bf16 (dequantized at "
          "load: bf16 on the GPU, the fp32 reference path on the CPU)");

namespace fm = flashserve::model;

namespace {

// The prompt's token ids: raw text, or the chat template's rendering of one user message.
std::vector<int32_t> encode_prompt(const fm::LoadedModel& m, const std::string& prompt,
                                   bool chat) {
  std::string text = prompt;
  if (chat) {
    if (!m.chat_template) {
      flashserve::exit_with_usage("--chat: the model file has no chat template");
    }
    const fm::ChatMessage message{"user", prompt};
    auto rendered = m.chat_template->render({&message, 1}, /*add_generation_prompt=*/true);
    if (!rendered.ok()) flashserve::exit_with_usage(rendered.status().message());
    text = *rendered;
  }
  return m.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/chat);
}

}  // namespace

int main(int argc, char** argv) {
  flashserve::parse_command_line(
      argc, argv,
      "--model PATH --prompt TEXT [--max-tokens N] [--temperature T] [--seed S] [--chat] "
      "[--threads N] [--device auto|cpu|cuda] [--weights auto|native|bf16]");
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string prompt = absl::GetFlag(FLAGS_prompt);
  const std::optional<uint64_t> seed = absl::GetFlag(FLAGS_seed);
  if (model_path.empty() || prompt.empty()) {
    flashserve::exit_with_usage("--model and --prompt are required");
  }
  if (absl::GetFlag(FLAGS_max_tokens) < 1) {
    flashserve::exit_with_usage("--max-tokens must be >= 1");
  }
  if (!(absl::GetFlag(FLAGS_temperature) >= 0)) {
    flashserve::exit_with_usage("--temperature must be >= 0");
  }
  if (absl::GetFlag(FLAGS_threads) < 0) flashserve::exit_with_usage("--threads must be >= 0");
  fm::LoadOptions options;
  options.num_threads = absl::GetFlag(FLAGS_threads);
  // One request at a time through an engine of the default budget (generate.cc).
  options.max_batch_tokens = fm::kDefaultStepTokens;
  auto device = fm::parse_device(absl::GetFlag(FLAGS_device));
  if (!device.ok()) flashserve::exit_with_usage("--" + std::string(device.status().message()));
  options.device = *device;
  auto weights = fm::parse_weights(absl::GetFlag(FLAGS_weights));
  if (!weights.ok()) flashserve::exit_with_usage("--" + std::string(weights.status().message()));
  options.weights = *weights;
  auto loaded = fm::load_model(model_path, options);
  if (!loaded.ok()) {
    std::fprintf(stderr, "flashserve-generate: %s\n",
                 std::string(loaded.status().message()).c_str());
    return 1;
  }
  fm::LoadedModel& m = *loaded;
  flashserve::tools::GenerateOptions request;
  request.prompt_tokens = encode_prompt(m, prompt, absl::GetFlag(FLAGS_chat));
  request.max_new_tokens = absl::GetFlag(FLAGS_max_tokens);
  request.sampling.temperature = absl::GetFlag(FLAGS_temperature);
  request.sampling.seed = seed.value_or(0);
  request.sampling.has_seed = seed.has_value();
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
