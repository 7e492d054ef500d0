#pragma once
// The random-weight architecture cases of tests/data/model_arch_random.json
// (tools/golden/arch_logits_golden.py): each case's file written again, byte for byte, with
// the flashserve-make-gguf options the golden script used, from the default model's
// tokenizer. Used by the CPU golden test (tests/unit/make_gguf) and the CUDA-vs-CPU test
// (tests/unit/model_cuda).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tools/make_gguf/make_gguf_args.h"
#include "tools/make_gguf/random_llama.h"

namespace flashserve::testing {

inline constexpr char kArchGolden[] = FLASHSERVE_SOURCE_DIR "/tests/data/model_arch_random.json";

// The tokenizer source: the default model, or FLASHSERVE_TEST_TOKENIZER_FROM (e.g. a
// `flashserve-make-gguf --vocab-only` copy of it, which carries the same tokenizer keys
// byte for byte, so the files written are the same: small enough to take to a GPU machine).
inline std::string arch_tokenizer_source() {
  const char* env = std::getenv("FLASHSERVE_TEST_TOKENIZER_FROM");
  return env != nullptr ? env
                        : std::string(FLASHSERVE_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// The golden's case named `name` (null json when absent: the caller asserts).
inline nlohmann::json arch_case(const std::string& name) {
  std::ifstream f(kArchGolden);
  EXPECT_TRUE(f.good()) << kArchGolden;
  if (!f.good()) return {};
  const nlohmann::json golden = nlohmann::json::parse(f);
  for (const nlohmann::json& c : golden["cases"]) {
    if (c["case"] == name) return c;
  }
  return {};
}

// FNV-1a 64 of a file's bytes, as 16 hex digits (the golden's file_fnv1a64).
inline std::string file_fnv1a64(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint64_t h = 0xCBF29CE484222325ull;
  for (std::istreambuf_iterator<char> it(f), end; it != end; ++it) {
    h = (h ^ static_cast<uint8_t>(*it)) * 0x100000001B3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// Writes the case's file to `path` with the golden's options; false (with a test failure)
// when the options do not parse, the write fails or the bytes differ from the golden's.
inline bool write_arch_case(const nlohmann::json& c, const std::string& path) {
  std::vector<std::string> args = {"--tokenizer-from", arch_tokenizer_source(), "--out", path,
                                   "--threads", "1"};
  for (const nlohmann::json& a : c["make_gguf_args"]) args.push_back(a);
  absl::StatusOr<tools::MakeGgufArgs> parsed = tools::parse_make_gguf_args(args);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return false;
  absl::StatusOr<tools::RandomLlamaSummary> written = tools::write_random_llama(parsed->options);
  EXPECT_TRUE(written.ok()) << written.status();
  if (!written.ok()) return false;
  const std::string hash = file_fnv1a64(path);
  EXPECT_EQ(hash, c["file_fnv1a64"].get<std::string>()) << "the file differs from the golden's";
  return hash == c["file_fnv1a64"].get<std::string>();
}

// The ForwardBatch of one prefill of `ids` at `positions` into blocks 0, 1, ... of a cache
// of `block_size`-token blocks (slots 0..n-1), no sampling.
inline model::ForwardBatch prefill_batch(const std::vector<int32_t>& ids,
                                         const std::vector<int32_t>& positions, int block_size) {
  model::ForwardBatch b;
  b.token_ids = ids;
  b.positions = positions;
  for (size_t i = 0; i < ids.size(); ++i) b.slot_mapping.push_back(static_cast<int32_t>(i));
  b.cu_seqlens_q = {0, b.num_tokens()};
  b.seqlens_k = {b.num_tokens()};
  b.max_blocks_per_seq = (b.num_tokens() + block_size - 1) / block_size;
  for (int i = 0; i < b.max_blocks_per_seq; ++i) b.block_tables.push_back(i);
  return b;
}

}  // namespace flashserve::testing
