// Byte-level BPE with the llama-bpe, gpt-2 and qwen2 pre-tokenizers on a synthetic vocabulary
// (tests/data/tokenizer_bpe_synthetic.json): ids equal llama.cpp's on the whole corpus. This
// covers what SmolLM2 does not: Llama-3's regex, ignore_merges (whole-word tokens no merge
// builds), BOS added by default, user-defined tokens.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/text/tokenizer.h"
#include "model/text/utf8.h"
#include "tests/support/json.h"

namespace flashserve::model {
namespace {

using testing::from_hex;
using testing::Json;

// Overlong forms and surrogates: see smollm2_test.cc and tests/data/README.md.
bool is_documented_divergence(const std::string& text) {
  return text == "\xC0\xAF" || text == "\xED\xA0\x80";
}

TEST(BpeAgainstLlamaCpp, AllPretokenizersOnTheCorpus) {
  const Json root = testing::read_json_file("tests/data/tokenizer_bpe_synthetic.json");
  TokenizerVocab base;
  base.model = "gpt2";
  for (const Json& t : root.at("vocab").at("tokens")) base.tokens.push_back(t.get<std::string>());
  for (const Json& t : root.at("vocab").at("token_types")) {
    base.token_types.push_back(static_cast<TokenType>(static_cast<int>(t.get<double>())));
  }
  for (const Json& m : root.at("vocab").at("merges")) base.merges.push_back(m.get<std::string>());
  base.bos_id = static_cast<int32_t>(root.at("vocab").at("bos_id").get<double>());
  base.eos_id = static_cast<int32_t>(root.at("vocab").at("eos_id").get<double>());

  for (const char* pre : {"llama-bpe", "gpt-2", "qwen2"}) {
    TokenizerVocab v = base;
    v.pre = pre;
    auto tok = tokenizer_from_vocab(v);
    ASSERT_TRUE(tok.ok()) << tok.status();
    const Json& cases = root.at("cases").at(pre);
    ASSERT_GE(cases.size(), 500u) << pre;
    int num_mismatches = 0;
    for (const Json& c : cases) {
      const std::string text = from_hex(c.at("hex").get<std::string>());
      if (is_documented_divergence(text)) continue;
      std::vector<int32_t> expected;
      for (const Json& id : c.at("ids")) expected.push_back(static_cast<int32_t>(id.get<double>()));
      const std::vector<int32_t> ids =
          (*tok)->encode(text, c.at("add_special").get<bool>(), c.at("parse_special").get<bool>());
      if (ids != expected) {
        ++num_mismatches;
        ADD_FAILURE() << pre << " " << ::testing::PrintToString(text)
                      << " add_special=" << c.at("add_special").get<bool>()
                      << "\n  ours:      " << ::testing::PrintToString(ids)
                      << "\n  llama.cpp: " << ::testing::PrintToString(expected);
      }
    }
    EXPECT_EQ(num_mismatches, 0) << pre;
  }
}

}  // namespace
}  // namespace flashserve::model
