#pragma once
// Where the tests find llama.cpp's vocabulary GGUFs and chat templates, fetched by
// scripts/fetch-test-vocab.sh into <source>/build/test-data/vocab (git-ignored; the same
// place for every build dir: build, build-asan, ...; see tests/data/README.md).
#include <string>
#include <string_view>

namespace flashserve::testing {

inline constexpr std::string_view kVocabMissing =
    "missing test data: run scripts/fetch-test-vocab.sh (scripts/test.sh does) to fetch ";

// <source>/build/test-data/vocab/<name>, e.g. vocab_file("ggml-vocab-qwen2.gguf") or
// vocab_file("templates/Qwen-Qwen3-0.6B.jinja").
inline std::string vocab_file(std::string_view name) {
  return std::string(FLASHSERVE_SOURCE_DIR "/build/test-data/vocab/") + std::string(name);
}

}  // namespace flashserve::testing
