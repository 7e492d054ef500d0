// Values of model/text/jinja.h: Python's truthiness, equality, str() and json.dumps().
#include "model/text/jinja_value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "model/text/utf8.h"

namespace flashserve::model::jinja {

Value Value::new_list(ValueList items) {
  Value v;
  v.kind = Kind::kList;
  v.list = std::make_shared<ValueList>(std::move(items));
  return v;
}

Value Value::new_map(ValueMap items) {
  Value v;
  v.kind = Kind::kMap;
  v.map = std::make_shared<ValueMap>(std::move(items));
  return v;
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s.empty();
    case Kind::kList: return !list->empty();
    case Kind::kMap: return is_namespace || !map->empty();
    case Kind::kMacro: return true;
  }
  return false;
}

const Value* Value::find(std::string_view key) const {
  if (kind != Kind::kMap) return nullptr;
  for (const auto& [k, v] : *map) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool is_number(const Value& v) {
  return v.kind == Value::Kind::kInt || v.kind == Value::Kind::kFloat || v.kind == Value::Kind::kBool;
}

double as_double(const Value& v) {
  if (v.kind == Value::Kind::kFloat) return v.f;
  if (v.kind == Value::Kind::kBool) return v.b ? 1 : 0;
  return static_cast<double>(v.i);
}

bool equal(const Value& a, const Value& b) {
  if (is_number(a) && is_number(b)) return as_double(a) == as_double(b);
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.s == b.s;
    case Value::Kind::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t i = 0; i < a.list->size(); ++i) {
        if (!equal((*a.list)[i], (*b.list)[i])) return false;
      }
      return true;
    case Value::Kind::kMap:
      if (a.map->size() != b.map->size()) return false;
      for (const auto& [k, v] : *a.map) {
        const Value* other = b.find(k);
        if (other == nullptr || !equal(v, *other)) return false;
      }
      return true;
    default: return false;
  }
}

namespace {

// Python's repr(float): the shortest digits that round-trip, in fixed notation when the
// decimal exponent is in [-4, 16), else as d.ddde+XX.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[40];
  int precision = 1;
  for (; precision < 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, d);
  const std::string sci = buf;  // [-]d[.ddd]e(+|-)XX
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[8];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const auto int_digits = static_cast<size_t>(exponent + 1);
  if (digits.size() <= int_digits) return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

std::string py_repr_string(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

std::string repr(const Value& v) {
  return v.kind == Value::Kind::kString ? py_repr_string(v.s) : to_string(v);
}

void json_string(std::string_view s, std::string& out) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

absl::Status json_value(const Value& v, int indent, int level, std::string& out) {
  const std::string newline = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (level + 1)), ' ') : "";
  const std::string close = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * level), ' ') : "";
  const std::string_view item_sep = indent >= 0 ? "," : ", ";
  switch (v.kind) {
    case Value::Kind::kUndefined:
      return absl::InvalidArgumentError("jinja: tojson of an undefined value");
    case Value::Kind::kMacro:
      return absl::InvalidArgumentError("jinja: tojson of a macro");
    case Value::Kind::kNone: out += "null"; return absl::OkStatus();
    case Value::Kind::kBool: out += v.b ? "true" : "false"; return absl::OkStatus();
    case Value::Kind::kInt: absl::StrAppend(&out, v.i); return absl::OkStatus();
    case Value::Kind::kFloat: out += float_repr(v.f); return absl::OkStatus();
    case Value::Kind::kString: json_string(v.s, out); return absl::OkStatus();
    case Value::Kind::kList:
      if (v.list->empty()) { out += "[]"; return absl::OkStatus(); }
      out += '[';
      for (size_t i = 0; i < v.list->size(); ++i) {
        if (i > 0) out += item_sep;
        out += newline;
        if (auto st = json_value((*v.list)[i], indent, level + 1, out); !st.ok()) return st;
      }
      out += close + "]";
      return absl::OkStatus();
    case Value::Kind::kMap: {
      if (v.map->empty()) { out += "{}"; return absl::OkStatus(); }
      out += '{';
      bool first = true;
      for (const auto& [k, item] : *v.map) {
        if (!first) out += item_sep;
        first = false;
        out += newline;
        json_string(k, out);
        out += ": ";
        if (auto st = json_value(item, indent, level + 1, out); !st.ok()) return st;
      }
      out += close + "}";
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string to_string(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kMacro: return "<macro>";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return v.b ? "True" : "False";
    case Value::Kind::kInt: return absl::StrCat(v.i);
    case Value::Kind::kFloat: return float_repr(v.f);
    case Value::Kind::kString: return v.s;
    case Value::Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < v.list->size(); ++i) absl::StrAppend(&out, i ? ", " : "", repr((*v.list)[i]));
      return out + "]";
    }
    case Value::Kind::kMap: {
      if (v.is_namespace) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : *v.map) {
        absl::StrAppend(&out, first ? "" : ", ", py_repr_string(k), ": ", repr(item));
        first = false;
      }
      return out + "}";
    }
  }
  return "";
}

absl::StatusOr<std::string> to_json(const Value& v, int indent) {
  std::string out;
  if (auto st = json_value(v, indent, 0, out); !st.ok()) return st;
  return out;
}

std::vector<std::string_view> codepoints(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t pos = 0; pos < s.size();) {
    const size_t len = std::min<size_t>(utf8_sequence_length(static_cast<unsigned char>(s[pos])), s.size() - pos);
    out.push_back(s.substr(pos, len));
    pos += len;
  }
  return out;
}

}  // namespace flashserve::model::jinja
