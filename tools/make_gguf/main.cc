// flashserve-make-gguf: a random-weight Llama GGUF with the tokenizer of another GGUF, for
// benchmarks on machines the real model cannot be carried to (tools/make_gguf/random_llama.h).
// Exit status: 0 written (or --help), 2 bad flags, 1 the file could not be written.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "model/gguf/ggml_type.h"
#include "tools/make_gguf/make_gguf_args.h"
#include "tools/make_gguf/random_llama.h"

namespace ft = flashserve::tools;

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<ft::MakeGgufArgs> parsed = ft::parse_make_gguf_args(args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "flashserve-make-gguf: %s\n%s", std::string(parsed.status().message()).c_str(),
                 ft::make_gguf_usage().c_str());
    return 2;
  }
  if (parsed->help) {
    std::fputs(ft::make_gguf_usage().c_str(), stdout);
    return 0;
  }
  const ft::RandomLlamaOptions& o = parsed->options;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<ft::RandomLlamaSummary> summary = ft::write_random_llama(o);
  if (!summary.ok()) {
    std::fprintf(stderr, "flashserve-make-gguf: %s\n", std::string(summary.status().message()).c_str());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s: %s, %d tensors, %.1fM parameters, vocab %d, %.1f MB in %.2f s\n", o.out.c_str(),
              o.name.c_str(), summary->num_tensors, summary->num_parameters / 1e6, summary->vocab_size,
              summary->file_bytes / 1e6, seconds);
  return 0;
}
