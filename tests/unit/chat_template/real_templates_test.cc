// Real chat templates (llama.cpp's models/templates/*.jinja and the templates of the qwen2
// and phi-3 vocabulary GGUFs, fetched by scripts/fetch-test-vocab.sh) against Python's jinja2
// (tests/data/chat_template_jinja2.json, tools/golden/chat_template_golden.py): every template
// our detection accepts renders exactly as jinja2 on every conversation of the golden, and
// fails where jinja2 raises; the templates of the families we support (those the golden
// stores in full) are all accepted. Templates no family renderer takes go to our Jinja
// interpreter (family "jinja") and are held to the same golden. Without the fetched files
// this test fails.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf.h"
#include "model/text/chat_template.h"
#include "tests/support/json.h"
#include "tests/support/vocab_files.h"

namespace flashserve::model {
namespace {

constexpr char kGolden[] = "tests/data/chat_template_jinja2.json";

std::string fnv1a64_hex(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : s) {
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The template source named in the golden: templates/<file>.jinja or ggml-vocab-<name>.gguf.
absl::StatusOr<std::string> template_source(const std::string& name) {
  const std::string path = testing::vocab_file(name);
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(std::string(testing::kVocabMissing) + path);
  }
  if (name.ends_with(".gguf")) {
    auto file = GgufFile::open(path);
    if (!file.ok()) return file.status();
    return (*file)->get_string("tokenizer.chat_template");
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::vector<std::vector<ChatMessage>> conversations(const testing::Json& root) {
  std::vector<std::vector<ChatMessage>> out;
  for (const testing::Json& conv : root.at("conversations")) {
    std::vector<ChatMessage> messages;
    for (const testing::Json& m : conv) {
      messages.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    }
    out.push_back(std::move(messages));
  }
  return out;
}

// Checks one accepted template on every case; returns the number of mismatching cases.
int check_cases(const ChatTemplate& tmpl, const testing::Json& t,
                const std::vector<std::vector<ChatMessage>>& convs) {
  const std::string name = t.at("name").get<std::string>();
  int mismatches = 0;
  for (const testing::Json& c : t.at("cases")) {
    const auto& messages = convs.at(static_cast<size_t>(c.at("conversation").get<int>()));
    ChatRenderOptions options;
    options.today = "01 Dec 2026";  // the golden's strftime_now
    options.now_unix_seconds = 1796126400;  // 2026-12-01 12:00:00 UTC
    if (c.contains("enable_thinking")) options.enable_thinking = c.at("enable_thinking").get<bool>();
    const bool add_gen = c.at("add_generation_prompt").get<bool>();
    auto rendered = tmpl.render(messages, add_gen, options);
    const std::string where = name + " conversation " + c.at("conversation").dump() +
                              " add_generation_prompt=" + (add_gen ? "true" : "false") +
                              (c.contains("enable_thinking") ? " enable_thinking=false" : "");
    if (c.contains("error")) {
      if (rendered.ok()) ++mismatches;
      EXPECT_FALSE(rendered.ok()) << where << ": jinja2 raised " << c.at("error").dump();
      continue;
    }
    if (!rendered.ok()) {
      ++mismatches;
      ADD_FAILURE() << where << ": " << rendered.status();
      continue;
    }
    if (fnv1a64_hex(*rendered) == c.at("fnv1a64").get<std::string>()) continue;
    ++mismatches;
    if (c.contains("rendered")) {
      EXPECT_EQ(*rendered, c.at("rendered").get<std::string>()) << where;
    } else {
      ADD_FAILURE() << where << " (" << tmpl.family_name() << ") differs from jinja2; ours:\n"
                    << *rendered;
    }
  }
  return mismatches;
}

TEST(RealChatTemplates, AcceptedTemplatesRenderAsJinja2) {
  const testing::Json root = testing::read_json_file(kGolden);
  const auto convs = conversations(root);
  ASSERT_GE(root.at("templates").size(), 70u);
  int num_accepted = 0, num_interpreted = 0;
  std::string refused;
  for (const testing::Json& t : root.at("templates")) {
    const std::string name = t.at("name").get<std::string>();
    auto source = template_source(name);
    ASSERT_TRUE(source.ok()) << source.status();
    auto tmpl = ChatTemplate::from_template_text(*source, "<|endoftext|>");  // the golden's eos
    const bool must_support =
        !t.at("cases").empty() && t.at("cases")[0].contains("rendered");
    if (!tmpl.ok()) {
      EXPECT_FALSE(must_support) << name << " is refused: " << tmpl.status();
      refused += "\n  " + name + ": " + std::string(tmpl.status().message()).substr(0, 300);
      continue;
    }
    ++num_accepted;
    if (tmpl->family() == ChatTemplate::Family::kJinja) ++num_interpreted;
    if (t.contains("parse_error")) {
      ADD_FAILURE() << name << " is accepted as " << tmpl->family_name()
                    << " but jinja2 cannot parse it";
      continue;
    }
    EXPECT_EQ(check_cases(*tmpl, t, convs), 0) << name << " accepted as " << tmpl->family_name();
  }
  std::printf("chat templates: %d accepted (%d by the Jinja interpreter), refused:%s\n",
              num_accepted, num_interpreted, refused.c_str());
  EXPECT_GE(num_accepted, 9);
}

}  // namespace
}  // namespace flashserve::model
