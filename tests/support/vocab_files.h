#pragma once
// Where the tests find llama.cpp's vocabulary GGUFs and chat templates, fetched by
// scripts/fetch-test-vocab.sh into <build dir>/test-data/vocab (see tests/data/README.md).
#include <string>
#include <string_view>

namespace flashserve::testing {

inline constexpr std::string_view kVocabMissing =
    "missing test data: run scripts/fetch-test-vocab.sh " FLASHSERVE_BINARY_DIR
    "/test-data/vocab (scripts/test.sh does) to fetch ";

// <build dir>/test-data/vocab/<name>, e.g. vocab_file("ggml-vocab-qwen2.gguf") or
// vocab_file("templates/Qwen-Qwen3-0.6B.jinja").
inline std::string vocab_file(std::string_view name) {
  return std::string(FLASHSERVE_BINARY_DIR "/test-data/vocab/") + std::string(name);
}

}  // namespace flashserve::testing
