// Built-in filters, tests, string/dict methods and global functions of model/text/jinja.h,
// following jinja2 3.1 and Python 3.
#include <algorithm>
#include <cmath>
#include <ctime>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/text/jinja_value.h"
#include "model/text/utf8.h"

namespace flashserve::model::jinja {
namespace {

using Kind = Value::Kind;

absl::Status type_error(std::string_view what, const Value& v) {
  return absl::InvalidArgumentError(absl::StrCat("jinja: ", to_absl(what), " cannot take ",
                                                 to_absl(to_string(v)).substr(0, 40)));
}

const Value* kwarg(const Kwargs& kwargs, std::string_view name) {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

// Python's str.strip(chars) family; chars empty: whitespace.
std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  if (chars == nullptr || chars->kind != Kind::kString) {
    if (left && right) return python_strip(s);
    std::string_view v = s;
    const std::string stripped = python_strip(s);
    if (stripped.empty()) return "";
    const size_t at = v.find(stripped);
    return left ? std::string(v.substr(at)) : std::string(v.substr(0, at + stripped.size()));
  }
  const std::vector<std::string_view> set = codepoints(chars->s);
  std::vector<std::string_view> cps = codepoints(s);
  auto in_set = [&](std::string_view c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t begin = 0, end = cps.size();
  while (left && begin < end && in_set(cps[begin])) ++begin;
  while (right && end > begin && in_set(cps[end - 1])) --end;
  std::string out;
  for (size_t i = begin; i < end; ++i) out += cps[i];
  return out;
}

ValueList iterate(const Value& v) {
  if (v.kind == Kind::kList) return *v.list;
  ValueList out;
  if (v.kind == Kind::kMap) {
    for (const auto& [k, item] : *v.map) out.push_back(Value::string(k));
  } else if (v.kind == Kind::kString) {
    for (std::string_view c : codepoints(v.s)) out.push_back(Value::string(std::string(c)));
  }
  return out;
}

Value items_of(const Value& v) {
  ValueList out;
  if (v.kind == Kind::kMap) {
    for (const auto& [k, item] : *v.map) out.push_back(Value::new_list({Value::string(k), item}));
  }
  return Value::new_list(std::move(out));
}

absl::StatusOr<Value> split(const std::string& s, const std::vector<Value>& args) {
  ValueList out;
  if (args.empty() || args[0].kind == Kind::kNone) {
    std::string_view rest = s;
    while (true) {
      const std::string stripped = strip_chars(std::string(rest), nullptr, true, false);
      if (stripped.empty()) break;
      rest = std::string_view(rest).substr(rest.size() - stripped.size());
      size_t n = 0;
      while (n < rest.size() && !absl::ascii_isspace(static_cast<unsigned char>(rest[n]))) ++n;
      out.push_back(Value::string(std::string(rest.substr(0, n))));
      rest.remove_prefix(n);
    }
    return Value::new_list(std::move(out));
  }
  if (args[0].kind != Kind::kString || args[0].s.empty()) return type_error("split", args[0]);
  const std::string& sep = args[0].s;
  int64_t max_split = args.size() > 1 && args[1].kind == Kind::kInt ? args[1].i : -1;
  size_t pos = 0;
  for (size_t at; max_split != 0 && (at = s.find(sep, pos)) != std::string::npos; --max_split) {
    out.push_back(Value::string(s.substr(pos, at - pos)));
    pos = at + sep.size();
  }
  out.push_back(Value::string(s.substr(pos)));
  return Value::new_list(std::move(out));
}

// Python's str.format with "{}" / "{N}" fields and "{{" "}}" escapes (no format specs).
absl::StatusOr<Value> format(const std::string& s, const std::vector<Value>& args) {
  std::string out;
  size_t next = 0;
  bool automatic = false, manual = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((s[i] == '{' || s[i] == '}') && i + 1 < s.size() && s[i + 1] == s[i]) {
      out += s[i++];
      continue;
    }
    if (s[i] == '}') return absl::InvalidArgumentError("jinja: format: single '}'");
    if (s[i] != '{') {
      out += s[i];
      continue;
    }
    const size_t close = s.find('}', i);
    if (close == std::string::npos) return absl::InvalidArgumentError("jinja: format: single '{'");
    const std::string field = s.substr(i + 1, close - i - 1);
    if (field.empty() ? manual : automatic) {
      return absl::InvalidArgumentError("jinja: format: automatic and manual field numbering mixed");
    }
    (field.empty() ? automatic : manual) = true;
    size_t index = next++;
    if (!field.empty()) {
      if (field.find_first_not_of("0123456789") != std::string::npos || field.size() > 6) {
        return absl::UnimplementedError(absl::StrCat("jinja: format field {", field, "}"));
      }
      index = std::stoul(field);
    }
    if (index >= args.size()) return absl::InvalidArgumentError("jinja: format: too few arguments");
    out += to_string(args[index]);
    i = close;
  }
  return Value::string(std::move(out));
}

absl::StatusOr<Value> string_method(const std::string& s, std::string_view name,
                                    const std::vector<Value>& args) {
  const Value* a0 = args.empty() ? nullptr : &args[0];
  if (name == "startswith" || name == "endswith") {
    if (a0 == nullptr || a0->kind != Kind::kString) return type_error(name, a0 ? *a0 : Value());
    return Value::boolean(name == "startswith" ? std::string_view(s).starts_with(a0->s)
                                               : std::string_view(s).ends_with(a0->s));
  }
  if (name == "strip") return Value::string(strip_chars(s, a0, true, true));
  if (name == "lstrip") return Value::string(strip_chars(s, a0, true, false));
  if (name == "rstrip") return Value::string(strip_chars(s, a0, false, true));
  if (name == "split") return split(s, args);
  if (name == "format") return format(s, args);
  if (name == "upper") return Value::string(absl::AsciiStrToUpper(s));
  if (name == "lower") return Value::string(absl::AsciiStrToLower(s));
  if (name == "replace") {
    if (args.size() < 2 || args[0].kind != Kind::kString || args[1].kind != Kind::kString) {
      return absl::InvalidArgumentError("jinja: replace takes two strings");
    }
    if (args[0].s.empty()) return absl::UnimplementedError("jinja: replace of an empty string");
    return Value::string(absl::StrReplaceAll(s, {{args[0].s, args[1].s}}));
  }
  if (name == "title" || name == "capitalize") {
    std::string out = absl::AsciiStrToLower(s);
    bool start = true;
    for (char& c : out) {
      if (start && absl::ascii_isalpha(static_cast<unsigned char>(c))) c = absl::ascii_toupper(c);
      start = name == "title" ? !absl::ascii_isalpha(static_cast<unsigned char>(c)) : false;
    }
    return Value::string(out);
  }
  return absl::UnimplementedError(absl::StrCat("jinja: string method ", to_absl(name)));
}

absl::StatusOr<Value> select_filter(std::string_view name, const Value& subject,
                                    const std::vector<Value>& args) {
  if (args.empty() || args[0].kind != Kind::kString) {
    return absl::UnimplementedError(absl::StrCat("jinja: ", to_absl(name), " without a test name"));
  }
  ValueList out;
  const std::vector<Value> test_args(args.begin() + 1, args.end());
  for (const Value& item : iterate(subject)) {
    auto ok = apply_test(args[0].s, item, test_args);
    if (!ok.ok()) return ok.status();
    if (*ok == (name == "select")) out.push_back(item);
  }
  return Value::new_list(std::move(out));
}

}  // namespace

absl::StatusOr<Value> sequence_filter(std::string_view name, const Value& v,
                                      const std::vector<Value>& args);

absl::StatusOr<Value> attr_filter(std::string_view name, const Value& v,
                                  const std::vector<Value>& args, const Kwargs& kwargs) {
  if (name == "selectattr" || name == "rejectattr") {
    if (args.empty() || args[0].kind != Kind::kString) {
      return absl::InvalidArgumentError(absl::StrCat("jinja: ", to_absl(name), " needs an attribute name"));
    }
    ValueList out;
    for (const Value& item : iterate(v)) {
      const Value* attr = item.find(args[0].s);
      const Value subject = attr != nullptr ? *attr : Value();
      bool keep = subject.truthy();
      if (args.size() > 1) {
        if (args[1].kind != Kind::kString) return absl::InvalidArgumentError("jinja: test name expected");
        auto r = apply_test(args[1].s, subject, std::vector<Value>(args.begin() + 2, args.end()));
        if (!r.ok()) return r.status();
        keep = *r;
      }
      if (keep == (name == "selectattr")) out.push_back(item);
    }
    return Value::new_list(std::move(out));
  }
  if (name == "map") {
    ValueList out;
    const Value* attribute = kwarg(kwargs, "attribute");
    for (const Value& item : iterate(v)) {
      if (attribute != nullptr && attribute->kind == Kind::kString) {
        const Value* found = item.find(attribute->s);
        out.push_back(found != nullptr ? *found : Value());
      } else if (!args.empty() && args[0].kind == Kind::kString) {
        auto mapped = apply_filter(args[0].s, item, std::vector<Value>(args.begin() + 1, args.end()), {});
        if (!mapped.ok()) return mapped.status();
        out.push_back(*std::move(mapped));
      } else {
        return absl::UnimplementedError("jinja: map without a filter or attribute");
      }
    }
    return Value::new_list(std::move(out));
  }
  return absl::UnimplementedError(absl::StrCat("jinja: filter '", to_absl(name), "'"));
}

absl::StatusOr<Value> apply_filter(std::string_view name, const Value& v,
                                   const std::vector<Value>& args, const Kwargs& kwargs) {
  if (name == "selectattr" || name == "rejectattr" || name == "map") {
    return attr_filter(name, v, args, kwargs);
  }
  if (name == "trim") {
    if (v.kind != Kind::kString) return type_error("trim", v);
    return Value::string(python_strip(v.s));
  }
  if (name == "tojson") {
    const Value* indent = kwarg(kwargs, "indent");
    if (indent == nullptr && !args.empty()) indent = &args[0];
    auto json = to_json(v, indent != nullptr && indent->kind == Kind::kInt ? static_cast<int>(indent->i) : -1);
    if (!json.ok()) return json.status();
    return Value::string(*std::move(json));
  }
  if (name == "length" || name == "count") {
    if (!v.defined()) return Value::integer(0);  // jinja2's Undefined has length 0
    if (v.kind == Kind::kString) return Value::integer(static_cast<int64_t>(codepoints(v.s).size()));
    if (v.kind == Kind::kList) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.kind == Kind::kMap) return Value::integer(static_cast<int64_t>(v.map->size()));
    return type_error("length", v);
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    if (v.kind != Kind::kString) return type_error(name, v);
    return string_method(v.s, name, args);
  }
  if (name == "replace") {
    if (v.kind != Kind::kString) return type_error(name, v);
    return string_method(v.s, name, args);
  }
  if (name == "string") return Value::string(to_string(v));
  if (name == "safe" || name == "e" || name == "escape") {
    if (name != "safe") return absl::UnimplementedError("jinja: escape filter");
    return v;
  }
  if (name == "default" || name == "d") {
    const bool boolean = args.size() > 1 && args[1].truthy();
    if (boolean ? !v.truthy() : !v.defined()) return args.empty() ? Value::string("") : args[0];
    return v;
  }
  if (name == "int") {
    if (v.kind == Kind::kInt) return v;
    if (v.kind == Kind::kFloat) {
      if (!(std::fabs(v.f) < 9.2e18)) return absl::InvalidArgumentError("jinja: int of a float out of range");
      return Value::integer(static_cast<int64_t>(v.f));
    }
    if (v.kind == Kind::kString) return Value::integer(std::strtoll(v.s.c_str(), nullptr, 10));
    return Value::integer(0);
  }
  return sequence_filter(name, v, args);
}

absl::StatusOr<Value> sequence_filter(std::string_view name, const Value& v,
                                      const std::vector<Value>& args) {
  if (name == "list") return Value::new_list(iterate(v));
  if (name == "items") return items_of(v);
  if (name == "first" || name == "last") {
    const ValueList items = iterate(v);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    if (v.kind == Kind::kString) {
      std::string out;
      for (const Value& c : items) out += c.s;
      return Value::string(out);
    }
    return Value::new_list(std::move(items));
  }
  if (name == "join") {
    const std::string sep = args.empty() ? "" : to_string(args[0]);
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
      absl::StrAppend(&out, first ? "" : sep, to_string(item));
      first = false;
    }
    return Value::string(out);
  }
  if (name == "unique") {
    ValueList out;
    for (const Value& item : iterate(v)) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equal(o, item); })) out.push_back(item);
    }
    return Value::new_list(std::move(out));
  }
  if (name == "dictsort") {
    if (v.kind != Kind::kMap) return type_error("dictsort", v);
    ValueMap sorted = *v.map;
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      return absl::AsciiStrToLower(a.first) < absl::AsciiStrToLower(b.first);
    });
    return items_of(Value::new_map(std::move(sorted)));
  }
  if (name == "select" || name == "reject") return select_filter(name, v, args);
  return absl::UnimplementedError(absl::StrCat("jinja: filter '", to_absl(name), "'"));
}

absl::StatusOr<bool> apply_test(std::string_view name, const Value& v,
                                const std::vector<Value>& args) {
  if (name == "defined") return v.defined();
  if (name == "undefined") return !v.defined();
  if (name == "none") return v.kind == Kind::kNone;
  if (name == "string") return v.kind == Kind::kString;
  if (name == "number") return v.kind == Kind::kInt || v.kind == Kind::kFloat;
  if (name == "integer") return v.kind == Kind::kInt;
  if (name == "float") return v.kind == Kind::kFloat;
  if (name == "boolean") return v.kind == Kind::kBool;
  if (name == "true") return v.kind == Kind::kBool && v.b;
  if (name == "false") return v.kind == Kind::kBool && !v.b;
  if (name == "mapping") return v.kind == Kind::kMap && !v.is_namespace;
  if (name == "iterable") return v.kind == Kind::kList || v.kind == Kind::kMap || v.kind == Kind::kString;
  if (name == "sequence") return v.kind == Kind::kList || v.kind == Kind::kString || v.kind == Kind::kMap;
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") {
    if (args.empty()) return absl::InvalidArgumentError("jinja: test equalto needs a value");
    return equal(v, args[0]);
  }
  if (name == "in") {
    if (args.empty()) return absl::InvalidArgumentError("jinja: test in needs a value");
    for (const Value& item : iterate(args[0])) {
      if (equal(item, v)) return true;
    }
    return false;
  }
  return absl::UnimplementedError(absl::StrCat("jinja: test '", to_absl(name), "'"));
}

absl::StatusOr<Value> call_method(const Value& object, std::string_view name,
                                  const std::vector<Value>& args) {
  if (object.kind == Kind::kString) return string_method(object.s, name, args);
  if (object.kind == Kind::kMap && !object.is_namespace) {
    if (name == "items") return items_of(object);
    if (name == "keys") return Value::new_list(iterate(object));
    if (name == "values") {
      ValueList out;
      for (const auto& [k, item] : *object.map) out.push_back(item);
      return Value::new_list(std::move(out));
    }
    if (name == "get") {
      if (args.empty() || args[0].kind != Kind::kString) return absl::InvalidArgumentError("jinja: get needs a key");
      const Value* found = object.find(args[0].s);
      if (found != nullptr) return *found;
      return args.size() > 1 ? args[1] : Value::none();
    }
  }
  if (!object.defined()) return absl::InvalidArgumentError(absl::StrCat("jinja: '", to_absl(name), "' of an undefined value"));
  return absl::UnimplementedError(absl::StrCat("jinja: method '", to_absl(name), "'"));
}

bool is_global_function(std::string_view name) {
  return name == "raise_exception" || name == "namespace" || name == "range" ||
         name == "strftime_now";
}

absl::StatusOr<Value> call_global(std::string_view name, const std::vector<Value>& args,
                                  const Kwargs& kwargs, int64_t today_epoch_seconds) {
  if (name == "raise_exception") {
    return absl::InvalidArgumentError(absl::StrCat(
        "jinja: raise_exception: ", args.empty() ? "" : to_absl(to_string(args[0]))));
  }
  if (name == "namespace") {
    Value ns = Value::new_map();
    ns.is_namespace = true;
    for (const auto& [k, v] : kwargs) ns.map->emplace_back(k, v);
    return ns;
  }
  if (name == "range") {
    if (args.empty() || args.size() > 3 ||
        std::any_of(args.begin(), args.end(), [](const Value& a) { return a.kind != Kind::kInt; })) {
      return absl::InvalidArgumentError("jinja: range takes one to three integers");
    }
    constexpr int64_t kLimit = int64_t{1} << 40;  // keeps the arithmetic below in range
    int64_t start = args.size() == 1 ? 0 : args[0].i;
    int64_t stop = args.size() == 1 ? args[0].i : args[1].i;
    const int64_t step = args.size() == 3 ? args[2].i : 1;
    if (step == 0) return absl::InvalidArgumentError("jinja: range step cannot be zero");
    start = std::clamp(start, -kLimit, kLimit);
    stop = std::clamp(stop, -kLimit, kLimit);
    const int64_t count = step > 0 ? (stop - start + step - 1) / step : (start - stop - step - 1) / -step;
    if (count > 100000) return absl::InvalidArgumentError("jinja: range too long");
    ValueList out;
    for (int64_t k = 0; k < count; ++k) out.push_back(Value::integer(start + k * step));
    return Value::new_list(std::move(out));
  }
  if (name == "strftime_now") {
    if (args.empty() || args[0].kind != Kind::kString) return absl::InvalidArgumentError("jinja: strftime_now needs a format");
    const std::time_t t = static_cast<std::time_t>(today_epoch_seconds);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[128];
    const size_t n = std::strftime(buf, sizeof(buf), args[0].s.c_str(), &tm);
    return Value::string(std::string(buf, n));
  }
  return absl::UnimplementedError(absl::StrCat("jinja: function '", to_absl(name), "'"));
}

}  // namespace flashserve::model::jinja
