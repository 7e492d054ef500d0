#pragma once
// Helpers over jinja::Value shared by the evaluator (internal to model/text/jinja*.cc).
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/jinja.h"
#include "model/text/jinja_ast.h"

namespace flashserve::model::jinja {

bool is_number(const Value& v);  // int, float or bool
double as_double(const Value& v);
bool equal(const Value& a, const Value& b);  // Python ==
std::string to_string(const Value& v);       // Python str(); undefined -> ""
// json.dumps(v, ensure_ascii=False[, indent]); indent < 0: none. Undefined is an error.
absl::StatusOr<std::string> to_json(const Value& v, int indent);
// The UTF-8 characters of `s` (Python indexes strings by code point).
std::vector<std::string_view> codepoints(std::string_view s);

// Parses a whole template (jinja_parse.cc).
absl::StatusOr<std::vector<Stmt>> parse_template(std::string_view source);

// Built-in filters, tests, methods and functions (jinja_builtins.cc). `args` are evaluated
// positional arguments; kwargs by name.
using Kwargs = std::vector<std::pair<std::string, Value>>;
absl::StatusOr<Value> apply_filter(std::string_view name, const Value& subject,
                                   const std::vector<Value>& args, const Kwargs& kwargs);
absl::StatusOr<bool> apply_test(std::string_view name, const Value& subject,
                                const std::vector<Value>& args);
absl::StatusOr<Value> call_method(const Value& object, std::string_view name,
                                  const std::vector<Value>& args);
// raise_exception, namespace, range, strftime_now: defined names (`is defined` holds).
bool is_global_function(std::string_view name);
absl::StatusOr<Value> call_global(std::string_view name, const std::vector<Value>& args,
                                  const Kwargs& kwargs, int64_t today_epoch_seconds);

}  // namespace flashserve::model::jinja
