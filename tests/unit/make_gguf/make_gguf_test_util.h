#pragma once
// Helpers of the flashserve-make-gguf tests: tokenizer sources (the real default model, or a
// synthetic byte-level BPE vocabulary written with the GGUF writer), and one forward pass.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf_writer.h"
#include "model/runner.h"
#include "tests/support/forward_test_util.h"
#include "model/text/bpe_tokenizer.h"

namespace flashserve::tools {

inline constexpr char kModelPath[] = FLASHSERVE_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

inline std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / ("make_gguf_" + name)).string();
}

// A GGUF with only tokenizer keys: 256 byte tokens, two merges, two control tokens.
inline std::string write_synthetic_tokenizer(const std::string& name) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(model::byte_to_unicode(static_cast<uint8_t>(b)));
    types.push_back(1);
  }
  const std::vector<std::string> merges = {"h e", "he l"};
  for (const char* t : {"he", "hel"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  for (const char* t : {"<s>", "</s>"}) {  // ids 258, 259
    tokens.push_back(t);
    types.push_back(3);
  }
  model::GgufWriter w;
  w.add("general.architecture", model::gguf_string("llama"))
      .add("tokenizer.ggml.model", model::gguf_string("gpt2"))
      .add("tokenizer.ggml.pre", model::gguf_string("gpt-2"))
      .add("tokenizer.ggml.tokens", model::gguf_string_array(tokens))
      .add("tokenizer.ggml.token_type", model::gguf_i32_array(types))
      .add("tokenizer.ggml.merges", model::gguf_string_array(merges))
      .add("tokenizer.ggml.bos_token_id", model::gguf_u32(258))
      .add("tokenizer.ggml.eos_token_id", model::gguf_u32(259));
  const std::string path = temp_path(name);
  EXPECT_TRUE(w.write_file(path).ok());
  return path;
}

// Runs `ids` as one prefill of one sequence (blocks 0, 1, ... of the cache), then `num_decode`
// greedy decode steps; returns the fp32 logits of every step (forward_logits through every
// layer), concatenated. Each step also runs the engine's path (forward with greedy
// sampling on the same batch, which rewrites the same K/V), whose token must be the argmax.
inline std::vector<float> prefill_and_decode(model::ModelRunner* runner, std::vector<int32_t> ids, int num_decode) {
  const int block = runner->kv_block_size(), vocab = runner->config().vocab_size;
  std::vector<float> all;
  size_t done = 0;
  for (int step = 0; step <= num_decode; ++step) {
    model::ForwardBatch b;
    for (size_t p = done; p < ids.size(); ++p) {
      b.token_ids.push_back(ids[p]);
      b.positions.push_back(static_cast<int32_t>(p));
      b.slot_mapping.push_back(static_cast<int32_t>(p));  // block i holds positions [i*block, ...)
    }
    b.cu_seqlens_q = {0, b.num_tokens()};
    b.seqlens_k = {static_cast<int32_t>(ids.size())};
    b.max_blocks_per_seq = (static_cast<int>(ids.size()) + block - 1) / block;
    for (int i = 0; i < b.max_blocks_per_seq; ++i) b.block_tables.push_back(i);
    std::vector<float> logits;
    absl::Status s = testing::logits_runner(runner)->forward_logits(b, runner->config().num_layers, &logits);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok() || logits.size() != static_cast<size_t>(vocab)) return all;
    all.insert(all.end(), logits.begin(), logits.end());
    b.sample_seqs = {0};
    b.sample_specs = {kernels::SampleSpec{}};  // temperature 0: greedy
    std::vector<model::SampledToken> sampled;
    s = runner->forward(b, &sampled, nullptr);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok() || sampled.size() != 1) return all;
    const int32_t argmax = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    EXPECT_EQ(sampled[0].token, argmax) << "step " << step;
    done = ids.size();
    ids.push_back(sampled[0].token);
  }
  return all;
}

}  // namespace flashserve::tools
