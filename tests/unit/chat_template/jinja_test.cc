// Our Jinja-subset interpreter (model/text/jinja.h) against Python's jinja2 on every real
// template llama.cpp ships (tests/data/chat_template_jinja2.json; see real_templates_test.cc):
// a template is either refused (Unimplemented, naming the construct, at parse or render time)
// or renders exactly as jinja2 on every case, failing where jinja2 raises. Plus small cases
// of the language itself.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/gguf/gguf.h"
#include "model/text/jinja.h"
#include "tests/support/json.h"
#include "tests/support/vocab_files.h"

namespace flashserve::model::jinja {
namespace {

constexpr int64_t kGoldenNow = 1796126400;  // 2026-12-01 12:00:00 UTC, the golden's strftime_now

std::string fnv1a64_hex(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string source_of(const std::string& name) {
  const std::string path = testing::vocab_file(name);
  if (name.ends_with(".gguf")) {
    auto file = GgufFile::open(path);
    if (!file.ok()) return "";
    auto text = (*file)->get_string("tokenizer.chat_template");
    return text.ok() ? *text : "";
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

Value messages_value(const testing::Json& conv) {
  ValueList list;
  for (const testing::Json& m : conv) {
    list.push_back(Value::new_map({{"role", Value::string(m.at("role").get<std::string>())},
                                   {"content", Value::string(m.at("content").get<std::string>())}}));
  }
  return Value::new_list(std::move(list));
}

std::string render_or_error(const JinjaTemplate& t, const std::map<std::string, Value>& globals) {
  auto r = t.render(globals, kGoldenNow);
  return r.ok() ? *r : "ERROR " + r.status().ToString();
}

Value render_value(std::string_view source) {
  auto t = JinjaTemplate::parse(source);
  if (!t.ok()) return Value::string("PARSE " + t.status().ToString());
  return Value::string(render_or_error(*t, {}));
}

TEST(Jinja, RealTemplatesRenderAsJinja2OrAreRefused) {
  const testing::Json root = testing::read_json_file("tests/data/chat_template_jinja2.json");
  const testing::Json& convs = root.at("conversations");
  int num_rendered = 0, num_refused = 0;
  std::string refused;
  for (const testing::Json& t : root.at("templates")) {
    const std::string name = t.at("name").get<std::string>();
    ASSERT_TRUE(std::filesystem::exists(testing::vocab_file(name))) << testing::kVocabMissing << name;
    auto tmpl = JinjaTemplate::parse(source_of(name));
    if (!tmpl.ok()) {
      EXPECT_EQ(tmpl.status().code(), absl::StatusCode::kUnimplemented) << name << ": " << tmpl.status();
      ++num_refused;
      refused += "\n  " + name + ": " + std::string(tmpl.status().message());
      continue;
    }
    bool template_refused = false;
    int mismatches = 0;
    for (const testing::Json& c : t.at("cases")) {
      std::map<std::string, Value> globals = {
          {"messages", messages_value(convs.at(c.at("conversation").get<int>()))},
          {"add_generation_prompt", Value::boolean(c.at("add_generation_prompt").get<bool>())},
          {"bos_token", Value::string("")},
          {"eos_token", Value::string("<|endoftext|>")}};
      if (c.contains("enable_thinking")) globals["enable_thinking"] = Value::boolean(false);
      auto r = tmpl->render(globals, kGoldenNow);
      if (c.contains("error")) {
        if (r.ok()) ++mismatches;
        EXPECT_FALSE(r.ok()) << name << ": jinja2 raised " << c.at("error").dump();
        continue;
      }
      if (!r.ok() && r.status().code() == absl::StatusCode::kUnimplemented) {
        template_refused = true;
        refused += "\n  " + name + " (rendering): " + std::string(r.status().message());
        break;
      }
      if (!r.ok() || fnv1a64_hex(*r) != c.at("fnv1a64").get<std::string>()) {
        ++mismatches;
        ADD_FAILURE() << name << " case " << c.dump().substr(0, 120) << "\nours: "
                      << (r.ok() ? *r : r.status().ToString())
                      << (c.contains("rendered") ? "\njinja2: " + c.at("rendered").get<std::string>() : "");
      }
    }
    if (template_refused) {
      ++num_refused;
    } else {
      EXPECT_EQ(mismatches, 0) << name;
      ++num_rendered;
    }
  }
  std::printf("jinja: %d templates render as jinja2, %d refused:%s\n", num_rendered, num_refused,
              refused.c_str());
  EXPECT_GE(num_rendered, 67);  // what renders today; refusals are listed in the output
}

// The seed tests/fuzz/corpus/chat_template/jinja_constructs (macro, namespace, reversed loop,
// loop filter, split/lstrip, selectattr/map/join/tojson); the expected text is jinja2 3.1.6's
// rendering in transformers' environment (tools/golden/chat_template_golden.py's make_env()).
TEST(Jinja, FuzzSeedMatchesJinja2) {
  std::ifstream in("tests/fuzz/corpus/chat_template/jinja_constructs", std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string seed = buf.str();
  auto t = JinjaTemplate::parse(seed.substr(0, seed.find('\0')));
  ASSERT_TRUE(t.ok()) << t.status();
  ValueList messages;
  for (auto [role, content] : std::vector<std::pair<std::string, std::string>>{
           {"system", "Be brief."}, {"user", "Hi <think>x</think>"},
           {"assistant", "<think>a</think>\n\nok "}, {"tool", "{}"}, {"user", "again"}}) {
    messages.push_back(Value::new_map({{"role", Value::string(role)}, {"content", Value::string(content)}}));
  }
  EXPECT_EQ(render_or_error(*t, {{"messages", Value::new_list(messages)},
                                 {"add_generation_prompt", Value::boolean(true)}}),
            "0:<|system|>Be brief.ok 3:<|user|>again\"Hi <think>x</think>,again\"<|assistant|>");
}

TEST(Jinja, Language) {
  EXPECT_EQ(render_value("a{{ 1 + 2 * 3 }}b").s, "a7b");
  EXPECT_EQ(render_value("{% for x in [1, 2, 3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}").s,
            "11,22,33");
  EXPECT_EQ(render_value("{% set ns = namespace(n=0) %}{% for x in 'abc' %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}").s, "3");
  EXPECT_EQ(render_value("{% set n = 0 %}{% for x in 'abc' %}{% set n = n + 1 %}{% endfor %}{{ n }}").s, "0");
  EXPECT_EQ(render_value("{{ '  x  ' | trim }}|{{ ' a b '.split() | length }}|{{ 'a</t>b'.split('</t>')[-1] }}").s,
            "x|2|b");
  EXPECT_EQ(render_value("{{ [1, 2, 3][::-1] }}{{ 'héllo'[1:3] }}").s, "[3, 2, 1]él");
  EXPECT_EQ(render_value("{{ {'a': [1, 'x\"'], 'b': none} | tojson }}").s, "{\"a\": [1, \"x\\\"\"], \"b\": null}");
  EXPECT_EQ(render_value("{{ x is defined }}{{ x is not defined }}{{ 'a' in 'cat' }}{{ 2 not in [1] }}").s,
            "FalseTrueTrueTrue");
  EXPECT_EQ(render_value("  {%- if true %}\n  a\n{% endif -%}\n  b").s, "  a\nb");
  EXPECT_EQ(render_value("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 1 / 2 }} {{ 'a' ~ 1 }}").s, "3 -4 1 0.5 a1");
  EXPECT_EQ(render_value("{{ raise_exception('no') }}").s, "ERROR INVALID_ARGUMENT: jinja: raise_exception: no");
  EXPECT_EQ(render_value("[{% filter trim | upper %}  x{{ 'y' }} \n{% endfilter %}]").s, "[XY]");
  EXPECT_EQ(render_value("{{ '<{}|{}>{{}}'.format('a', 2) }}{{ '{1}{0}'.format('a', 2) }}").s, "<a|2>{}2a");
  EXPECT_EQ(render_value("{{ '{}{0}'.format('a') }}").s.substr(0, 22), "ERROR INVALID_ARGUMENT");
  EXPECT_EQ(render_value("{% call f() %}{% endcall %}").s,
            "PARSE UNIMPLEMENTED: line 1: jinja: {% call %} is not supported");
  EXPECT_EQ(render_value("{% macro f(a, b='B') %}<{{ a }}{{ b }}{{ top }}>{% endmacro %}"
                         "{% set top = 'T' %}{% set a = 'outer' %}{{ f(1) }}{{ f('x', b=2) }}{{ a }}")
                .s,
            "<1BT><x2T>outer");
  EXPECT_EQ(render_value("{% if %}").s.substr(0, 22), "PARSE INVALID_ARGUMENT");
  EXPECT_EQ(render_value("{{ x.y }}").s.substr(0, 22), "ERROR INVALID_ARGUMENT");
  EXPECT_EQ(render_value("{{ strftime_now('%d %b %Y') }}").s, "01 Dec 2026");
  // Python's repr(float) (values from python3: repr(100.0), repr(1/3), repr(1e16), ...).
  EXPECT_EQ(render_value("{{ 100.0 }} {{ 1 / 3 }} {{ 10000000000000000.0 }} {{ 0.0001 }} "
                         "{{ 0.00001 }} {{ -2.5 }} {{ 123456789.125 }} {{ 2 * 0.1 }}").s,
            "100.0 0.3333333333333333 1e+16 0.0001 1e-05 -2.5 123456789.125 0.2");
}

// Hostile templates end in a status, never a crash or a hang.
TEST(Jinja, LimitsOnHostileTemplates) {
  std::string nested;
  for (int i = 0; i < 200; ++i) nested += "{% if true %}";
  EXPECT_EQ(render_value(nested).s.substr(0, 22), "PARSE INVALID_ARGUMENT");
  EXPECT_EQ(render_value("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}").s.substr(0, 22),
            "PARSE INVALID_ARGUMENT");
  EXPECT_EQ(render_value("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").s,
            "ERROR INVALID_ARGUMENT: jinja: macros nested too deeply");
  EXPECT_EQ(render_value("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}").s,
            "ERROR INVALID_ARGUMENT: jinja: string too long");
  EXPECT_EQ(render_value("{{ 9223372036854775807 + 1 }}").s, "ERROR INVALID_ARGUMENT: jinja: integer overflow");
  // Found by fuzz_chat_template: an integer literal beyond int64.
  EXPECT_EQ(render_value("{yefo{% if aen-----" + std::string(120, '7') + "-----%ges %}\xC2\xA0").s.substr(0, 22),
            "PARSE INVALID_ARGUMENT");
  EXPECT_EQ(render_value("{{ -(-9223372036854775807 - 1) }}").s, "ERROR INVALID_ARGUMENT: jinja: integer overflow");
  EXPECT_EQ(render_value("{{ (-9223372036854775807 - 1) % 3 }} {{ (-9223372036854775807 - 1) // 3 }} {{ -7 % 3 }} {{ 7 % -3 }}").s,
            "1 -3074457345618258603 2 -2");
  EXPECT_EQ(render_value("{{ 1e300 | int }}").s.substr(0, 5), "PARSE");  // no exponent literals
  EXPECT_EQ(render_value("{{ [1, 2, 3][::9223372036854775807] }}{{ [1, 2, 3][-9223372036854775807:] }}").s,
            "[1][1, 2, 3]");
  EXPECT_EQ(render_value("{% for i in range(100000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}").s,
            "ERROR INVALID_ARGUMENT: jinja: template runs too long");
}

}  // namespace
}  // namespace flashserve::model::jinja
