// Chat templates: SmolLM2's own template rendered by jinja2 is the golden
// (tests/data/tokenizer_chat_template_smollm2.json); detection follows llama.cpp.
#include "model/text/chat_template.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf.h"
#include "tests/support/json.h"

namespace flashserve::model {
namespace {

std::vector<ChatMessage> messages_of(const testing::Json& list) {
  std::vector<ChatMessage> out;
  for (const testing::Json& m : list) out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  return out;
}

TEST(ChatTemplate, SmolLm2MatchesJinja2) {
  const testing::Json root =
      testing::read_json_file("tests/data/tokenizer_chat_template_smollm2.json");
  auto tmpl = ChatTemplate::from_template_text(root.at("template").get<std::string>());
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  EXPECT_EQ(tmpl->family_name(), "chatml");
  EXPECT_EQ(tmpl->default_system_prompt(),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  ASSERT_GE(root.at("cases").size(), 8u);
  for (const testing::Json& c : root.at("cases")) {
    const std::vector<ChatMessage> messages = messages_of(c.at("messages"));
    auto rendered = tmpl->render(messages, c.at("add_generation_prompt").get<bool>());
    ASSERT_TRUE(rendered.ok()) << rendered.status();
    EXPECT_EQ(*rendered, c.at("rendered").get<std::string>());
  }
}

TEST(ChatTemplate, FromTheRealModelFile) {
  constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << kModel << " is absent";
  auto file = GgufFile::open(kModel);
  ASSERT_TRUE(file.ok()) << file.status();
  auto tmpl = ChatTemplate::from_gguf(**file);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  EXPECT_EQ(tmpl->family_name(), "chatml");
  std::vector<ChatMessage> messages = {{"user", "Hi"}};
  EXPECT_EQ(*tmpl->render(messages, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, DefaultSystemPromptWithEscapedNewlines) {
  // Qwen2-style template text as stored in tokenizer_config.json: "\n" is an escape inside
  // the Jinja literal rather than a real newline.
  const std::string qwen =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  auto tmpl = ChatTemplate::from_template_text(qwen);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  EXPECT_EQ(tmpl->default_system_prompt(), "You are a helpful assistant.");
  std::vector<ChatMessage> with_system = {{"system", "S"}, {"user", "U"}};
  EXPECT_EQ(*tmpl->render(with_system, false),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
}

TEST(ChatTemplate, PlainChatmlHasNoDefaultSystemPrompt) {
  auto tmpl = ChatTemplate::from_template_text(
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
      "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_EQ(tmpl->default_system_prompt(), "");
  std::vector<ChatMessage> messages = {{"user", "U"}};
  EXPECT_EQ(*tmpl->render(messages, false), "<|im_start|>user\nU<|im_end|>\n");
}

TEST(ChatTemplate, DetectsFamiliesLikeLlamaCpp) {
  struct Case { std::string text; std::string family; };
  const std::vector<Case> cases = {
      {"{{ '<|im_start|>' + message['role'] }}", "chatml"},
      {"{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + message['content'] + "
       "' [/INST]' }}{% endif %}", "llama2-sys-bos"},
      {"{{ '[INST] ' + content.strip() + ' [/INST]' }}", "llama2-sys-strip"},
      {"{{ '<<SYS>>\\n' + system + '\\n<</SYS>>' }}{{ '[INST] ' }}", "llama2-sys"},
      {"{{ '[INST] ' + message['content'] + ' [/INST]' }}", "llama2"},
      {"{{ '<|user|>\\n' + message['content'] + '<|endoftext|>' }}", "zephyr"},
      {"{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}", "llama3"},
      {"llama3", "llama3"},
      {"zephyr", "zephyr"},
      {"chatml", "chatml"},
      {"llama2-sys", "llama2-sys"},
  };
  for (const Case& c : cases) {
    auto tmpl = ChatTemplate::from_template_text(c.text);
    ASSERT_TRUE(tmpl.ok()) << c.text << ": " << tmpl.status();
    EXPECT_EQ(tmpl->family_name(), c.family) << c.text;
  }
}

TEST(ChatTemplate, UnknownTemplatesGoToTheInterpreter) {
  auto unknown = ChatTemplate::from_template_text("{{ messages[-1]['content'] }}!");
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(unknown->family_name(), "jinja");
  std::vector<ChatMessage> messages = {{"user", "hi"}};
  EXPECT_EQ(*unknown->render(messages, true), "hi!");
  // A raise_exception at request time is an InvalidArgument naming the message.
  auto strict = ChatTemplate::from_template_text(
      "{% if messages | length > 4 %}{{ raise_exception('too long') }}{% endif %}"
      "{{ messages[-1].content }}");
  ASSERT_TRUE(strict.ok()) << strict.status();
  std::vector<ChatMessage> many(5, ChatMessage{"user", "x"});
  auto r = strict->render(many, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("too long"), std::string::npos) << r.status();
  // A template that refuses system messages is still accepted: it serves the others.
  auto no_system = ChatTemplate::from_template_text(
      "{% if messages[0]['role'] == 'system' %}{{ raise_exception('no system role') }}{% endif %}"
      "{% for m in messages %}[{{ m['content'] }}]{% endfor %}");
  ASSERT_TRUE(no_system.ok()) << no_system.status();
  std::vector<ChatMessage> with_system = {{"system", "s"}, {"user", "u"}};
  EXPECT_NE(no_system->render(with_system, true).status().message().find("no system role"),
            std::string::npos);
  EXPECT_EQ(*no_system->render(messages, true), "[hi]");
}

TEST(ChatTemplate, UnknownAndUnsupportedTemplatesAreErrors) {
  // Neither a family nor something our interpreter can run: both reasons are given.
  auto unknown = ChatTemplate::from_template_text("{% call f() %}{% endcall %}{{ messages }}");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unrecognised chat template"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("{% call %}"), std::string::npos) << unknown.status();
  for (const char* empty : {"", "{# nothing #}", "{{ bos_token }}"}) {
    auto no_messages = ChatTemplate::from_template_text(empty);
    ASSERT_FALSE(no_messages.ok()) << "'" << empty << "'";
    EXPECT_NE(no_messages.status().message().find("lacks its last user message"), std::string::npos)
        << no_messages.status();
  }
  auto broken = ChatTemplate::from_template_text("{{ x.y }}");  // fails the trial render
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("undefined"), std::string::npos) << broken.status();

  auto phi4 = ChatTemplate::from_template_text("{{ '<|im_start|>' + role + '<|im_sep|>' }}");
  ASSERT_FALSE(phi4.ok());
  EXPECT_EQ(phi4.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(phi4.status().message().find("phi4"), std::string::npos);

  // Variants of our families that render differently are refused, naming what we saw.
  auto qwq = ChatTemplate::from_template_text(
      "{{ '<|im_start|>' }}{% set content = message.content.split('</think>')[-1] %}<think>");
  ASSERT_FALSE(qwq.ok());
  EXPECT_EQ(qwq.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(qwq.status().message().find("'<think>'"), std::string::npos) << qwq.status();
  auto hermes = ChatTemplate::from_template_text("{{ '<|im_start|>' + content | trim }}");
  ASSERT_FALSE(hermes.ok());
  EXPECT_NE(hermes.status().message().find("'trim'"), std::string::npos) << hermes.status();
  // ... and such a variant that the interpreter can run is the interpreter's.
  auto phi_tools = ChatTemplate::from_template_text(
      "<|assistant|><|end|>{{ tools }}{{ messages[-1].content }}");
  ASSERT_TRUE(phi_tools.ok()) << phi_tools.status();
  EXPECT_EQ(phi_tools->family_name(), "jinja");

  auto mistral7 =
      ChatTemplate::from_template_text("[SYSTEM_PROMPT] [INST]{% filter upper %}{% endfilter %}");
  ASSERT_FALSE(mistral7.ok());
  EXPECT_EQ(mistral7.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(ChatTemplate, RenderRejectsBadMessages) {
  auto tmpl = ChatTemplate::from_template_text("chatml");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_EQ(tmpl->render({}, true).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<ChatMessage> no_role = {{"", "x"}};
  EXPECT_EQ(tmpl->render(no_role, true).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace flashserve::model

namespace flashserve::model {
namespace {

// Every family we render, by name, against llama.cpp's llama_chat_apply_template on the same
// conversations (tests/data/tokenizer_chat_template_llamacpp.json).
TEST(ChatTemplate, FamiliesMatchLlamaCpp) {
  const testing::Json root =
      testing::read_json_file("tests/data/tokenizer_chat_template_llamacpp.json");
  ASSERT_GE(root.at("cases").size(), 80u);
  for (const testing::Json& c : root.at("cases")) {
    auto tmpl = ChatTemplate::from_template_text(c.at("family").get<std::string>());
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    const std::vector<ChatMessage> messages = messages_of(c.at("messages"));
    auto rendered = tmpl->render(messages, c.at("add_generation_prompt").get<bool>());
    ASSERT_TRUE(rendered.ok()) << rendered.status();
    EXPECT_EQ(*rendered, c.at("rendered").get<std::string>())
        << c.at("family").get<std::string>() << " add_generation_prompt=" << c.at("add_generation_prompt").get<bool>();
  }
}

}  // namespace
}  // namespace flashserve::model
