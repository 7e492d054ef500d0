// llama.cpp's own tokenizer tests on real vocabularies: each vocabulary-only GGUF
// ggml-vocab-<name>.gguf that llama.cpp ships comes with <name>.gguf.inp (texts separated by
// "\n__ggml_vocab_test__\n") and <name>.gguf.out (one line of ids per text), written by
// ggml-org/llama.cpp:convert_hf_to_gguf_update.py with the model's original Hugging Face tokenizer.
// Like llama.cpp's test-tokenizer-0 we tokenize with add_special = false, parse_special =
// false and require identical ids for every pair.
//
// The files come from the llama-cpp-python 0.3.36 sdist, fetched by
// scripts/fetch-test-vocab.sh into build/test-data/vocab (scripts/test.sh runs it before
// ctest). Without them these tests fail, naming the script: they are never skipped.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "model/gguf/gguf.h"
#include "model/text/tokenizer.h"
#include "tests/support/vocab_files.h"

namespace flashserve::model {
namespace {

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// The pairs of ggml-vocab-<name>.gguf.{inp,out}, split as test-tokenizer-0.cpp splits them.
std::vector<VocabCase> read_cases(const std::string& gguf_path) {
  const std::string inp = read_file(gguf_path + ".inp");
  const std::string out = read_file(gguf_path + ".out");
  std::vector<std::string> texts;
  constexpr std::string_view kSep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(kSep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + kSep.size();
  }
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // getline: no empty last line
  EXPECT_EQ(texts.size(), lines.size()) << gguf_path;
  std::vector<VocabCase> cases;
  for (size_t i = 0; i < texts.size() && i < lines.size(); ++i) {
    VocabCase c{texts[i], {}};
    for (const std::string& id :
         std::vector<std::string>(absl::StrSplit(lines[i], ' ', absl::SkipEmpty()))) {
      c.ids.push_back(std::stoi(id));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

class LlamaCppVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocab, EveryTestPairIdentical) {
  const std::string path = testing::vocab_file("ggml-vocab-" + GetParam() + ".gguf");
  ASSERT_TRUE(std::filesystem::exists(path)) << testing::kVocabMissing << path;
  ASSERT_TRUE(std::filesystem::exists(path + ".inp")) << testing::kVocabMissing << path;
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tok = tokenizer_from_gguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<VocabCase> cases = read_cases(path);
  ASSERT_GE(cases.size(), 30u) << path;
  int mismatches = 0;
  for (const VocabCase& c : cases) {
    const std::vector<int32_t> ids = (*tok)->encode(c.text, false, false);
    // Every test text is valid UTF-8 that these vocabularies can spell: decoding gives it back.
    EXPECT_EQ((*tok)->decode(c.ids, false), c.text) << GetParam();
    if (ids == c.ids) continue;
    ++mismatches;
    ADD_FAILURE() << GetParam() << ": text '" << c.text << "'\n  expected "
                  << absl::StrJoin(c.ids, " ") << "\n  got      " << absl::StrJoin(ids, " ");
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " pairs";
}

INSTANTIATE_TEST_SUITE_P(RealVocabularies, LlamaCppVocab,
                         ::testing::Values("llama-bpe", "llama-spm", "qwen2", "qwen35", "phi-3",
                                           "gemma-4", "gpt-2", "starcoder", "refact", "mpt"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace flashserve::model
