// Rendering for model/text/jinja.h: walks the tree of jinja_ast.h with jinja2's scoping (a
// for loop's body has its own scope; namespace() objects are the way out of it).
#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/jinja.h"
#include "model/text/jinja_ast.h"
#include "model/text/jinja_value.h"
#include "model/text/utf8.h"

namespace flashserve::model::jinja {
namespace {

using Kind = Value::Kind;
enum class Flow { kNormal, kBreak, kContinue };

absl::Status error(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("jinja: ", to_absl(what)));
}

// Python's a[i] / a[b:e:s] index arithmetic.
int64_t normalize(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

class Renderer {
 public:
  Renderer(const std::map<std::string, Value>& globals, int64_t today)
      : globals_(globals), today_(today) {
    scopes_.emplace_back();
  }

  absl::Status exec(const std::vector<Stmt>& body, std::string& out, Flow& flow) {
    for (const Stmt& s : body) {
      if (++steps_ > kMaxSteps) return error("template runs too long");
      RETURN_IF_ERROR(exec_one(s, out, flow));
      if (out.size() > kMaxString) return error("output too long");
      if (flow != Flow::kNormal) return absl::OkStatus();
    }
    return absl::OkStatus();
  }

 private:
  static constexpr int64_t kMaxSteps = 1'000'000;  // statements and loop iterations
  static constexpr size_t kMaxString = size_t{1} << 24;
  static constexpr size_t kMaxDepth = 64;

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      if (auto found = it->find(name); found != it->end()) return found->second;
    }
    if (auto found = globals_.find(name); found != globals_.end()) return found->second;
    if (is_global_function(name)) return Value::string("<function " + name + ">");
    return Value();
  }

  absl::Status exec_one(const Stmt& s, std::string& out, Flow& flow) {
    switch (s.kind) {
      case Stmt::Kind::kText: out += s.text; return absl::OkStatus();
      case Stmt::Kind::kOutput: {
        ASSIGN_OR_RETURN(Value v, eval(*s.expr));
        out += to_string(v);
        return absl::OkStatus();
      }
      case Stmt::Kind::kIf:
        for (const auto& [cond, branch] : s.branches) {
          bool take = cond == nullptr;
          if (!take) {
            ASSIGN_OR_RETURN(Value c, eval(*cond));
            take = c.truthy();
          }
          if (take) return exec(branch, out, flow);
        }
        return absl::OkStatus();
      case Stmt::Kind::kFor: return exec_for(s, out);
      case Stmt::Kind::kSet: {
        ASSIGN_OR_RETURN(Value v, eval(*s.expr));
        return assign(s.target, std::move(v));
      }
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        Flow inner = Flow::kNormal;
        RETURN_IF_ERROR(exec(s.body, captured, inner));
        return assign(s.target, Value::string(std::move(captured)));
      }
      case Stmt::Kind::kMacro: {
        Value m;
        m.kind = Kind::kMacro;
        m.macro = &s;
        scopes_.back()[s.target[0]] = std::move(m);
        return absl::OkStatus();
      }
      case Stmt::Kind::kFilterBlock: {
        std::string captured;
        Flow inner = Flow::kNormal;
        RETURN_IF_ERROR(exec(s.body, captured, inner));
        scopes_.emplace_back();
        scopes_.back()[kFilterBody] = Value::string(std::move(captured));
        auto filtered = eval(*s.expr);
        scopes_.pop_back();
        if (!filtered.ok()) return filtered.status();
        out += to_string(*filtered);
        return absl::OkStatus();
      }
      case Stmt::Kind::kBreak: flow = Flow::kBreak; return absl::OkStatus();
      case Stmt::Kind::kContinue: flow = Flow::kContinue; return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  absl::Status assign(const std::vector<std::string>& target, Value v) {
    if (target.size() == 1) {
      scopes_.back()[target[0]] = std::move(v);
      return absl::OkStatus();
    }
    Value ns = lookup(target[0]);
    if (!ns.is_namespace) return error(absl::StrCat("set ", target[0], ".", target[1], " on a non-namespace"));
    for (auto& [k, item] : *ns.map) {
      if (k == target[1]) {
        item = std::move(v);
        return absl::OkStatus();
      }
    }
    ns.map->emplace_back(target[1], std::move(v));
    return absl::OkStatus();
  }

  absl::StatusOr<ValueList> loop_items(const Stmt& s) {
    ASSIGN_OR_RETURN(Value seq, eval(*s.expr));
    ValueList items;
    if (seq.kind == Kind::kList) {
      items = *seq.list;
    } else if (seq.kind == Kind::kMap && !seq.is_namespace) {
      for (const auto& [k, v] : *seq.map) items.push_back(Value::string(k));
    } else if (seq.kind == Kind::kString) {
      for (std::string_view c : codepoints(seq.s)) items.push_back(Value::string(std::string(c)));
    } else if (seq.defined() && seq.kind != Kind::kNone) {
      return error("for over a value that is not iterable");
    } else if (seq.kind == Kind::kNone) {
      return error("for over none");
    }
    if (s.condition == nullptr) return items;
    ValueList kept;
    for (Value& item : items) {
      scopes_.emplace_back();
      RETURN_IF_ERROR(bind(s.target, item));
      auto c = eval(*s.condition);
      scopes_.pop_back();
      if (!c.ok()) return c.status();
      if (c->truthy()) kept.push_back(std::move(item));
    }
    return kept;
  }

  absl::Status bind(const std::vector<std::string>& vars, const Value& item) {
    if (vars.size() == 1) {
      scopes_.back()[vars[0]] = item;
      return absl::OkStatus();
    }
    if (item.kind != Kind::kList || item.list->size() != vars.size()) {
      return error("cannot unpack a loop item into the loop variables");
    }
    for (size_t i = 0; i < vars.size(); ++i) scopes_.back()[vars[i]] = (*item.list)[i];
    return absl::OkStatus();
  }

  absl::Status exec_for(const Stmt& s, std::string& out) {
    if (scopes_.size() > kMaxDepth) return error("loops nested too deeply");
    ASSIGN_OR_RETURN(ValueList items, loop_items(s));
    if (items.empty()) {
      Flow flow = Flow::kNormal;
      return exec(s.else_body, out, flow);
    }
    const auto n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      if (++steps_ > kMaxSteps) return error("template runs too long");
      scopes_.emplace_back();
      Value loop = Value::new_map({{"index0", Value::integer(i)}, {"index", Value::integer(i + 1)},
                                   {"revindex0", Value::integer(n - 1 - i)}, {"revindex", Value::integer(n - i)},
                                   {"first", Value::boolean(i == 0)}, {"last", Value::boolean(i == n - 1)},
                                   {"length", Value::integer(n)},
                                   {"previtem", i > 0 ? items[i - 1] : Value()},
                                   {"nextitem", i + 1 < n ? items[i + 1] : Value()}});
      scopes_.back()["loop"] = std::move(loop);
      absl::Status st = bind(s.target, items[i]);
      Flow flow = Flow::kNormal;
      if (st.ok()) st = exec(s.body, out, flow);
      scopes_.pop_back();
      RETURN_IF_ERROR(st);
      if (flow == Flow::kBreak) break;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<Value>> eval_args(const Expr& e, size_t first) {
    std::vector<Value> args;
    for (size_t i = first; i < e.args.size(); ++i) {
      ASSIGN_OR_RETURN(Value v, eval(*e.args[i]));
      args.push_back(std::move(v));
    }
    return args;
  }

  absl::StatusOr<Kwargs> eval_kwargs(const Expr& e) {
    Kwargs kwargs;
    for (const auto& [k, x] : e.kwargs) {
      ASSIGN_OR_RETURN(Value v, eval(*x));
      kwargs.emplace_back(k, std::move(v));
    }
    return kwargs;
  }

  absl::StatusOr<Value> attribute(const Value& object, const std::string& name) {
    if (!object.defined()) return error(absl::StrCat("attribute '", name, "' of an undefined value"));
    if (const Value* v = object.find(name)) return *v;
    return Value();
  }

  absl::StatusOr<Value> index(const Value& object, const Value& key) {
    if (!object.defined()) return error("subscript of an undefined value");
    if (object.kind == Kind::kMap && key.kind == Kind::kString) {
      const Value* v = object.find(key.s);
      return v != nullptr ? *v : Value();
    }
    if ((object.kind == Kind::kList || object.kind == Kind::kString) && key.kind == Kind::kInt) {
      const std::vector<std::string_view> cps =
          object.kind == Kind::kString ? codepoints(object.s) : std::vector<std::string_view>();
      const auto n = static_cast<int64_t>(object.kind == Kind::kList ? object.list->size() : cps.size());
      const int64_t i = normalize(key.i, n);
      if (i < 0 || i >= n) return Value();
      if (object.kind == Kind::kList) return (*object.list)[i];
      return Value::string(std::string(cps[i]));
    }
    return Value();
  }

  absl::StatusOr<Value> slice(const Expr& e) {
    ASSIGN_OR_RETURN(Value object, eval(*e.args[0]));
    std::optional<int64_t> parts[3];
    for (int k = 0; k < 3; ++k) {
      if (e.args[k + 1] == nullptr) continue;
      ASSIGN_OR_RETURN(Value v, eval(*e.args[k + 1]));
      if (v.kind == Kind::kNone) continue;
      if (v.kind != Kind::kInt) return error("slice bounds must be integers");
      parts[k] = v.i;
    }
    ValueList items;
    if (object.kind == Kind::kList) {
      items = *object.list;
    } else if (object.kind == Kind::kString) {
      for (std::string_view c : codepoints(object.s)) items.push_back(Value::string(std::string(c)));
    } else {
      return error("slice of a value that is not a list or string");
    }
    const auto n = static_cast<int64_t>(items.size());
    const int64_t raw_step = parts[2].value_or(1);
    if (raw_step == 0) return error("slice step cannot be zero");
    // A step beyond the length takes one item at most: clamp it so that i += step cannot overflow.
    const int64_t step = std::clamp<int64_t>(raw_step, -n - 1, n + 1);
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      int64_t x = std::clamp<int64_t>(*v, -n - 1, n + 1);
      x = normalize(x, n);
      return step > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t begin = clamp(parts[0], step > 0 ? 0 : n - 1);
    const int64_t end = clamp(parts[1], step > 0 ? n : -1);
    ValueList out;
    for (int64_t i = begin; step > 0 ? i < end : i > end; i += step) out.push_back(items[i]);
    if (object.kind == Kind::kList) return Value::new_list(std::move(out));
    std::string s;
    for (const Value& c : out) s += c.s;
    return Value::string(std::move(s));
  }

  absl::StatusOr<Value> call(const Expr& e) {
    ASSIGN_OR_RETURN(std::vector<Value> args, eval_args(e, 1));
    ASSIGN_OR_RETURN(Kwargs kwargs, eval_kwargs(e));
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::Kind::kAttr) {
      ASSIGN_OR_RETURN(Value object, eval(*callee.args[0]));
      return call_method(object, callee.name, args);
    }
    if (callee.kind == Expr::Kind::kName) {
      const Value named = lookup(callee.name);
      if (named.kind == Kind::kMacro) return call_macro(*named.macro, std::move(args), kwargs);
      return call_global(callee.name, args, kwargs, today_);
    }
    return error("call of something that is not a function");
  }

  // Runs a macro in a scope of its own above the template's top level (jinja2: a macro sees
  // the template's globals and top-level names, not the caller's locals).
  absl::StatusOr<Value> call_macro(const Stmt& m, std::vector<Value> args, const Kwargs& kwargs) {
    const size_t num_params = m.target.size() - 1;
    if (args.size() > num_params) return absl::UnimplementedError("jinja: macro varargs");
    if (macro_depth_ >= kMaxDepth) return error("macros nested too deeply");
    ++macro_depth_;
    std::vector<std::map<std::string, Value>> saved = std::move(scopes_);
    scopes_ = {saved.front(), {}};
    absl::Status st;
    for (size_t i = 0; i < num_params && st.ok(); ++i) {
      const std::string& param = m.target[i + 1];
      Value v;
      if (i < args.size()) {
        v = std::move(args[i]);
      } else if (auto it = std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return kv.first == param; });
                 it != kwargs.end()) {
        v = it->second;
      } else if (m.defaults[i] != nullptr) {
        auto d = eval(*m.defaults[i]);
        if (d.ok()) v = *std::move(d); else st = d.status();
      }
      scopes_.back()[param] = std::move(v);
    }
    std::string out;
    Flow flow = Flow::kNormal;
    if (st.ok()) st = exec(m.body, out, flow);
    scopes_ = std::move(saved);
    --macro_depth_;
    RETURN_IF_ERROR(st);
    return Value::string(std::move(out));
  }

  absl::StatusOr<Value> arithmetic(const std::string& op, const Value& a, const Value& b) {
    if (op == "+" && a.kind == Kind::kString && b.kind == Kind::kString) {
      if (a.s.size() + b.s.size() > kMaxString) return error("string too long");
      return Value::string(a.s + b.s);
    }
    if (op == "+" && a.kind == Kind::kList && b.kind == Kind::kList) {
      if (a.list->size() + b.list->size() > kMaxString) return error("list too long");
      ValueList items = *a.list;
      items.insert(items.end(), b.list->begin(), b.list->end());
      return Value::new_list(std::move(items));
    }
    if (!is_number(a) || !is_number(b)) {
      return error(absl::StrCat("operator ", op, " on '", to_string(a).substr(0, 30), "' and '",
                                to_string(b).substr(0, 30), "'"));
    }
    const bool ints = a.kind != Kind::kFloat && b.kind != Kind::kFloat;
    const double x = as_double(a), y = as_double(b);
    if (op == "/" || ((op == "//" || op == "%") && y == 0)) {
      if (y == 0) return error("division by zero");
      if (op == "/") return Value::number(x / y);
    }
    if (ints) {
      const int64_t p = a.kind == Kind::kBool ? a.b : a.i, q = b.kind == Kind::kBool ? b.b : b.i;
      int64_t r = 0;
      bool overflow = false;
      if (op == "+") overflow = __builtin_add_overflow(p, q, &r);
      if (op == "-") overflow = __builtin_sub_overflow(p, q, &r);
      if (op == "*") overflow = __builtin_mul_overflow(p, q, &r);
      if (op == "//" || op == "%") {
        if (p == INT64_MIN && q == -1) {
          overflow = true;
        } else {  // Python floors: the remainder takes the divisor's sign
          int64_t quotient = p / q, remainder = p % q;
          if (remainder != 0 && ((remainder < 0) != (q < 0))) {
            --quotient;
            remainder += q;
          }
          r = op == "//" ? quotient : remainder;
        }
      }
      if (overflow) return error("integer overflow");
      return Value::integer(r);
    }
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "//") return Value::number(std::floor(x / y));
    if (op == "%") return Value::number(x - y * std::floor(x / y));
    return error(absl::StrCat("operator ", op));
  }

  absl::StatusOr<Value> binary(const Expr& e) {
    const std::string& op = e.name;
    ASSIGN_OR_RETURN(Value a, eval(*e.args[0]));
    if (op == "and") return a.truthy() ? eval(*e.args[1]) : a;
    if (op == "or") return a.truthy() ? a : eval(*e.args[1]);
    ASSIGN_OR_RETURN(Value b, eval(*e.args[1]));
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "~") {
      std::string joined = to_string(a) + to_string(b);
      if (joined.size() > kMaxString) return error("string too long");
      return Value::string(std::move(joined));
    }
    if (op == "in") {
      bool found = false;
      if (b.kind == Kind::kString && a.kind == Kind::kString) {
        found = b.s.find(a.s) != std::string::npos;
      } else if (b.kind == Kind::kMap && a.kind == Kind::kString) {
        found = b.find(a.s) != nullptr;
      } else if (b.kind == Kind::kList) {
        for (const Value& item : *b.list) found = found || equal(item, a);
      } else if (b.defined()) {  // in an undefined value (which iterates as empty): false
        return error("'in' on a value that is not a container");
      }
      return Value::boolean(found != e.negate);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c = 0;
      if (is_number(a) && is_number(b)) {
        c = as_double(a) < as_double(b) ? -1 : as_double(a) > as_double(b) ? 1 : 0;
      } else if (a.kind == Kind::kString && b.kind == Kind::kString) {
        c = a.s.compare(b.s);
      } else {
        return error(absl::StrCat("comparison ", op, " of different types"));
      }
      const bool r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
      return Value::boolean(r);
    }
    return arithmetic(op, a, b);
  }

  absl::StatusOr<Value> eval(const Expr& e) {
    if (++depth_ > kMaxDepth * 4) return error("expression nested too deeply");
    auto v = eval_inner(e);
    --depth_;
    return v;
  }

  absl::StatusOr<Value> eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kAttr: {
        ASSIGN_OR_RETURN(Value object, eval(*e.args[0]));
        return attribute(object, e.name);
      }
      case Expr::Kind::kIndex: {
        ASSIGN_OR_RETURN(Value object, eval(*e.args[0]));
        ASSIGN_OR_RETURN(Value key, eval(*e.args[1]));
        return index(object, key);
      }
      case Expr::Kind::kSlice: return slice(e);
      case Expr::Kind::kCall: return call(e);
      case Expr::Kind::kFilter: {
        ASSIGN_OR_RETURN(Value subject, eval(*e.args[0]));
        ASSIGN_OR_RETURN(std::vector<Value> args, eval_args(e, 1));
        ASSIGN_OR_RETURN(Kwargs kwargs, eval_kwargs(e));
        return apply_filter(e.name, subject, args, kwargs);
      }
      case Expr::Kind::kTest: {
        ASSIGN_OR_RETURN(Value subject, eval(*e.args[0]));
        ASSIGN_OR_RETURN(std::vector<Value> args, eval_args(e, 1));
        ASSIGN_OR_RETURN(bool r, apply_test(e.name, subject, args));
        return Value::boolean(r != e.negate);
      }
      case Expr::Kind::kUnary: {
        ASSIGN_OR_RETURN(Value v, eval(*e.args[0]));
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (v.kind == Kind::kInt) {
          if (v.i == INT64_MIN) return error("integer overflow");
          return Value::integer(-v.i);
        }
        if (v.kind == Kind::kFloat) return Value::number(-v.f);
        return error("unary - of a value that is not a number");
      }
      case Expr::Kind::kBinary: return binary(e);
      case Expr::Kind::kTernary: {
        ASSIGN_OR_RETURN(Value c, eval(*e.args[1]));
        if (c.truthy()) return eval(*e.args[0]);
        return e.args[2] != nullptr ? eval(*e.args[2]) : Value();
      }
      case Expr::Kind::kList: {
        ASSIGN_OR_RETURN(std::vector<Value> items, eval_args(e, 0));
        return Value::new_list(std::move(items));
      }
      case Expr::Kind::kDict: {
        ASSIGN_OR_RETURN(Kwargs items, eval_kwargs(e));
        return Value::new_map(ValueMap(items.begin(), items.end()));
      }
    }
    return error("unknown expression");
  }

  const std::map<std::string, Value>& globals_;
  int64_t today_;
  std::vector<std::map<std::string, Value>> scopes_;
  int64_t steps_ = 0;
  size_t depth_ = 0;
  size_t macro_depth_ = 0;
};

}  // namespace

JinjaTemplate::JinjaTemplate() = default;
JinjaTemplate::JinjaTemplate(JinjaTemplate&&) noexcept = default;
JinjaTemplate& JinjaTemplate::operator=(JinjaTemplate&&) noexcept = default;
JinjaTemplate::~JinjaTemplate() = default;

absl::StatusOr<JinjaTemplate> JinjaTemplate::parse(std::string_view source) {
  ASSIGN_OR_RETURN(std::vector<Stmt> body, parse_template(source));
  JinjaTemplate t;
  t.body_ = std::make_shared<const std::vector<Stmt>>(std::move(body));
  return t;
}

absl::StatusOr<std::string> JinjaTemplate::render(const std::map<std::string, Value>& globals,
                                                  int64_t today_epoch_seconds) const {
  Renderer r(globals, today_epoch_seconds);
  std::string out;
  Flow flow = Flow::kNormal;
  RETURN_IF_ERROR(r.exec(*body_, out, flow));
  return out;
}

}  // namespace flashserve::model::jinja
