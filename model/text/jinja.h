#pragma once
// A Jinja-subset interpreter for chat templates (tokenizer.chat_template), rendering as
// transformers does: jinja2 with trim_blocks, lstrip_blocks and loopcontrols, a tojson filter
// with ensure_ascii=False, raise_exception() and strftime_now().
//
// Supported: text, {{ expr }}, {# comments #}, whitespace control (-), {% if/elif/else %},
// {% for a[, b] in expr [if cond] %} with else, loop.index/index0/first/last/length/revindex
// and break/continue, {% set x = expr %}, {% set ns.attr = expr %}, {% set x %}...{% endset %},
// {% macro name(a, b=default) %} (called like a function; no caller/varargs),
// {% filter f | g %}...{% endfilter %};
// expressions with literals (strings, numbers, true/false/none, lists, tuples (as lists),
// dicts with string keys), attribute and
// item access, slices, + - * / // % ~, comparisons, and/or/not, in / not in, is [not] tests
// (defined, undefined, none, string, number, integer, boolean, mapping, iterable, sequence,
// true, false, equalto), the ternary if/else, filters (trim, tojson, length, count, upper,
// lower, join, first, last, default, string, int, list, items, dictsort, replace, capitalize,
// title, safe, unique, reverse, select/reject, selectattr/rejectattr, map), string methods (startswith,
// endswith, split, strip, lstrip, rstrip, replace, upper, lower, title, format), dict methods (get,
// items, keys, values) and the globals raise_exception, namespace, strftime_now and range.
// On llama.cpp's 72 real templates, 67 render exactly as jinja2 (tests/unit/chat_template/
// jinja_test.cc); the rest are refused.
// Anything else (call blocks, custom tags, dict keys that are not strings) is refused when parsing,
// with a status naming it; errors while rendering (raise_exception, a type error, a missing
// attribute of an undefined value) are statuses too. Nothing here can crash on bad input.
//
// Thread-safety: a parsed JinjaTemplate is immutable; render() may be called concurrently.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace flashserve::model::jinja {

struct Value;
struct Expr;
struct Stmt;
using ValueList = std::vector<Value>;
using ValueMap = std::vector<std::pair<std::string, Value>>;  // in insertion order

// A Jinja value: what Python objects a chat template sees.
struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kMap, kMacro };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<ValueList> list;  // shared: lists and maps are Python references
  std::shared_ptr<ValueMap> map;
  bool is_namespace = false;  // namespace(): the one mutable map
  const Stmt* macro = nullptr;  // kMacro: its definition (owned by the parsed template)

  static Value none() { Value v; v.kind = Kind::kNone; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::kBool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::kInt; v.i = x; return v; }
  static Value number(double x) { Value v; v.kind = Kind::kFloat; v.f = x; return v; }
  static Value string(std::string x) { Value v; v.kind = Kind::kString; v.s = std::move(x); return v; }
  static Value new_list(ValueList items = {});
  static Value new_map(ValueMap items = {});

  bool defined() const { return kind != Kind::kUndefined; }
  bool truthy() const;
  // The map entry `key`, or nullptr.
  const Value* find(std::string_view key) const;
};

class JinjaTemplate {
 public:
  // Parses `source`. InvalidArgument naming the line for a syntax error, Unimplemented
  // naming the construct for what we do not support.
  static absl::StatusOr<JinjaTemplate> parse(std::string_view source);

  // Renders with the given global variables (messages, add_generation_prompt, bos_token, ...).
  // `today` is what strftime_now formats (seconds since the epoch, UTC).
  absl::StatusOr<std::string> render(const std::map<std::string, Value>& globals,
                                     int64_t today_epoch_seconds) const;

  JinjaTemplate(JinjaTemplate&&) noexcept;
  JinjaTemplate& operator=(JinjaTemplate&&) noexcept;
  ~JinjaTemplate();

 private:
  JinjaTemplate();
  std::shared_ptr<const std::vector<Stmt>> body_;
};

}  // namespace flashserve::model::jinja
