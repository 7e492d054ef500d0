// Parsing for model/text/jinja.h: the template is cut into text, {{ }} and {% %} pieces (with
// jinja2's whitespace rules: trim_blocks, lstrip_blocks, '-' modifiers), each tag's contents
// are tokenized, and a recursive-descent parser builds the tree of jinja_ast.h.
#include <array>
#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/jinja.h"
#include "model/text/jinja_ast.h"
#include "model/text/utf8.h"

namespace flashserve::model::jinja {
namespace {

struct Piece {
  enum class Kind { kText, kOutput, kBlock };
  Kind kind;
  std::string content;
  int line;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Index of `closer` in `src` from `pos`, skipping string literals; npos if none.
size_t find_closer(std::string_view src, size_t pos, std::string_view closer) {
  char quote = 0;
  for (size_t i = pos; i < src.size(); ++i) {
    const char c = src[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (src.substr(i, closer.size()) == closer) {
      return i;
    }
  }
  return std::string_view::npos;
}

// lstrip_blocks: when only spaces and tabs stand between the start of the line (in the
// source) and the tag at `open`, removes them from the end of `text`.
void lstrip_line(std::string_view src, size_t open, std::string& text) {
  size_t k = 0;
  while (k < open && (src[open - k - 1] == ' ' || src[open - k - 1] == '\t')) ++k;
  if (k < open && src[open - k - 1] != '\n') return;
  while (k > 0 && !text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.pop_back();
    --k;
  }
}

absl::StatusOr<std::vector<Piece>> cut(std::string_view src) {
  std::vector<Piece> pieces;
  std::string text;
  bool strip_next = false;      // a '-' before the last closer
  bool newline_next = false;    // trim_blocks after the last block closer
  int line = 1;
  size_t pos = 0;
  auto flush_text = [&]() {
    if (!text.empty()) pieces.push_back({Piece::Kind::kText, std::move(text), line});
    text.clear();
  };
  while (pos < src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string_view::npos && open + 1 < src.size() &&
           src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#') {
      open = src.find('{', open + 1);
    }
    if (open + 1 >= src.size()) open = std::string_view::npos;
    std::string_view chunk = src.substr(pos, open == std::string_view::npos ? src.npos : open - pos);
    if (strip_next) {
      while (!chunk.empty() && is_space(chunk.front())) chunk.remove_prefix(1);
    } else if (newline_next && chunk.starts_with('\n')) {
      chunk.remove_prefix(1);
    }
    strip_next = newline_next = false;
    text += chunk;
    for (char c : src.substr(pos, open == std::string_view::npos ? src.npos : open - pos)) line += c == '\n';
    if (open == std::string_view::npos) break;
    const char type = src[open + 1];
    size_t inner = open + 2;
    const bool minus = inner < src.size() && src[inner] == '-';
    const bool plus = inner < src.size() && src[inner] == '+';
    if (minus || plus) ++inner;
    if (minus) {
      while (!text.empty() && is_space(text.back())) text.pop_back();
    } else if (type != '{' && !plus) {
      lstrip_line(src, open, text);
    }
    const std::string_view closer = type == '{' ? "}}" : type == '%' ? "%}" : "#}";
    const size_t close = type == '#' ? src.find(closer, inner) : find_closer(src, inner, closer);
    if (close == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("jinja: line ", line, ": unclosed tag"));
    }
    size_t content_end = close;
    if (content_end > inner && src[content_end - 1] == '-') {
      --content_end;
      strip_next = true;
    } else if (content_end > inner && src[content_end - 1] == '+') {
      --content_end;
    } else if (type != '{') {
      newline_next = true;
    }
    flush_text();
    if (type != '#') {
      pieces.push_back({type == '{' ? Piece::Kind::kOutput : Piece::Kind::kBlock,
                        std::string(src.substr(inner, content_end - inner)), line});
    }
    for (char c : src.substr(open, close + 2 - open)) line += c == '\n';
    pos = close + 2;
  }
  flush_text();
  return pieces;
}

// ---- expression tokens ----

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd };
  Kind kind;
  std::string text;
};

absl::StatusOr<std::string> read_string(std::string_view s, size_t& i) {
  const char quote = s[i++];
  std::string out;
  while (i < s.size() && s[i] != quote) {
    char c = s[i++];
    if (c == '\\' && i < s.size()) {
      const char e = s[i++];
      switch (e) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        case '\\': case '\'': case '"': c = e; break;
        default: out += '\\'; c = e;
      }
    }
    out += c;
  }
  if (i >= s.size()) return absl::InvalidArgumentError("jinja: unterminated string literal");
  ++i;
  return out;
}

absl::StatusOr<std::vector<Token>> tokenize(std::string_view s) {
  std::vector<Token> tokens;
  static constexpr std::string_view kOps[] = {"==", "!=", "<=", ">=", "//", "**", "(", ")", "[",
                                               "]", "{", "}", ".", ",", ":", "|", "~", "+",
                                               "-", "*", "/", "%", "<", ">", "="};
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
    } else if (c == '\'' || c == '"') {
      ASSIGN_OR_RETURN(std::string str, read_string(s, i));
      tokens.push_back({Token::Kind::kString, std::move(str)});
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      const bool is_float = j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]));
      if (is_float) {
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      tokens.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, std::string(s.substr(i, j - i))});
      i = j;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      tokens.push_back({Token::Kind::kName, std::string(s.substr(i, j - i))});
      i = j;
    } else {
      bool matched = false;
      for (std::string_view op : kOps) {
        if (s.substr(i, op.size()) == op) {
          tokens.push_back({Token::Kind::kOp, std::string(op)});
          i += op.size();
          matched = true;
          break;
        }
      }
      if (!matched) {
        return absl::InvalidArgumentError(absl::StrCat("jinja: unexpected character '", std::string(1, c), "'"));
      }
    }
  }
  tokens.push_back({Token::Kind::kEnd, ""});
  return tokens;
}

// ---- expressions ----

using ExprPtr = std::unique_ptr<Expr>;

ExprPtr make(Expr::Kind kind, std::string name = {}) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->name = std::move(name);
  return e;
}

class ExprParser {
 public:
  explicit ExprParser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<ExprPtr> expression() {
    if (++depth_ > kMaxDepth) return absl::InvalidArgumentError("jinja: expression nested too deeply");
    auto e = ternary();
    --depth_;
    return e;
  }
  bool at_end() const { return peek().kind == Token::Kind::kEnd; }
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  bool accept_name(std::string_view name) {
    if (peek().kind != Token::Kind::kName || peek().text != name) return false;
    ++pos_;
    return true;
  }
  bool accept_op(std::string_view op) {
    if (peek().kind != Token::Kind::kOp || peek().text != op) return false;
    ++pos_;
    return true;
  }
  absl::Status expect_op(std::string_view op) {
    if (accept_op(op)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("jinja: expected '", std::string(op), "' before '", peek().text, "'"));
  }
  absl::StatusOr<std::string> name() {
    if (peek().kind != Token::Kind::kName) {
      return absl::InvalidArgumentError(absl::StrCat("jinja: expected a name before '", peek().text, "'"));
    }
    return tokens_[pos_++].text;
  }

  absl::StatusOr<ExprPtr> ternary() {
    ASSIGN_OR_RETURN(ExprPtr value, binary(0));
    if (!accept_name("if")) return value;
    auto e = make(Expr::Kind::kTernary);
    e->args.push_back(std::move(value));
    ASSIGN_OR_RETURN(ExprPtr cond, binary(0));
    e->args.push_back(std::move(cond));
    if (accept_name("else")) {
      ASSIGN_OR_RETURN(ExprPtr other, ternary());
      e->args.push_back(std::move(other));
    } else {
      e->args.push_back(nullptr);
    }
    return e;
  }

 private:
  // Binary operators by precedence level, lowest first.
  static constexpr int kLevels = 7;
  bool match_binary(int level, std::string& op, bool& negate) {
    static const std::vector<std::vector<std::string_view>> kOps = {
        {"or"}, {"and"}, {}, {"==", "!=", "<", ">", "<=", ">=", "in"}, {"~"}, {"+", "-"},
        {"*", "/", "//", "%"}};
    negate = false;
    if (level == 3 && peek().kind == Token::Kind::kName && peek().text == "not" &&
        peek(1).kind == Token::Kind::kName && peek(1).text == "in") {
      pos_ += 2;
      op = "in";
      negate = true;
      return true;
    }
    for (std::string_view o : kOps[level]) {
      const bool word = std::isalpha(static_cast<unsigned char>(o[0]));
      if ((word ? peek().kind == Token::Kind::kName : peek().kind == Token::Kind::kOp) && peek().text == o) {
        ++pos_;
        op = std::string(o);
        return true;
      }
    }
    return false;
  }

  absl::StatusOr<ExprPtr> binary(int level) {
    if (level == 2) {  // "not" binds looser than comparisons
      if (accept_name("not")) {
        if (++depth_ > kMaxDepth) return absl::InvalidArgumentError("jinja: expression nested too deeply");
        auto e = make(Expr::Kind::kUnary, "not");
        ASSIGN_OR_RETURN(ExprPtr operand, binary(2));
        e->args.push_back(std::move(operand));
        --depth_;
        return e;
      }
      return binary(3);
    }
    if (level == kLevels) return unary();
    ASSIGN_OR_RETURN(ExprPtr left, binary(level + 1));
    std::string op;
    bool negate = false;
    while (true) {
      if (level == 3 && peek().kind == Token::Kind::kName && peek().text == "is") {
        ASSIGN_OR_RETURN(left, test(std::move(left)));
        continue;
      }
      if (!match_binary(level, op, negate)) break;
      auto e = make(Expr::Kind::kBinary, op);
      e->negate = negate;
      e->args.push_back(std::move(left));
      ASSIGN_OR_RETURN(ExprPtr right, binary(level + 1));
      e->args.push_back(std::move(right));
      left = std::move(e);
    }
    return left;
  }

  absl::StatusOr<ExprPtr> test(ExprPtr subject) {
    ++pos_;  // "is"
    auto e = make(Expr::Kind::kTest);
    e->negate = accept_name("not");
    ASSIGN_OR_RETURN(e->name, name());
    e->args.push_back(std::move(subject));
    if (accept_op("(")) {
      RETURN_IF_ERROR(call_args(*e));
    } else if (peek().kind == Token::Kind::kString || peek().kind == Token::Kind::kInt ||
               (peek().kind == Token::Kind::kName && (peek().text == "none" || peek().text == "true" || peek().text == "false"))) {
      ASSIGN_OR_RETURN(ExprPtr arg, primary());  // "is equalto 'x'", "is sameas none"
      e->args.push_back(std::move(arg));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> unary() {
    if (accept_op("-")) {
      if (++depth_ > kMaxDepth) return absl::InvalidArgumentError("jinja: expression nested too deeply");
      auto e = make(Expr::Kind::kUnary, "-");
      ASSIGN_OR_RETURN(ExprPtr operand, unary());
      e->args.push_back(std::move(operand));
      --depth_;
      return e;
    }
    ASSIGN_OR_RETURN(ExprPtr e, postfix());
    while (accept_op("|")) {
      auto f = make(Expr::Kind::kFilter);
      ASSIGN_OR_RETURN(f->name, name());
      f->args.push_back(std::move(e));
      if (accept_op("(")) RETURN_IF_ERROR(call_args(*f));
      e = std::move(f);
    }
    return e;
  }

  // Arguments after "(" up to ")": positional into e.args, name=value into e.kwargs.
  absl::Status call_args(Expr& e) {
    while (!accept_op(")")) {
      if (peek().kind == Token::Kind::kName && peek(1).kind == Token::Kind::kOp && peek(1).text == "=") {
        std::string key = tokens_[pos_].text;
        pos_ += 2;
        ASSIGN_OR_RETURN(ExprPtr value, expression());
        e.kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        ASSIGN_OR_RETURN(ExprPtr value, expression());
        e.args.push_back(std::move(value));
      }
      if (!accept_op(",")) {
        RETURN_IF_ERROR(expect_op(")"));
        break;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> subscript(ExprPtr subject) {
    std::array<ExprPtr, 3> parts;
    int colons = 0;
    while (!accept_op("]")) {
      if (accept_op(":")) {
        if (++colons > 2) return absl::InvalidArgumentError("jinja: a slice has at most two ':'");
        continue;
      }
      ASSIGN_OR_RETURN(parts[colons], expression());
      if (peek().kind == Token::Kind::kEnd) return absl::InvalidArgumentError("jinja: unclosed '['");
    }
    auto e = make(colons == 0 ? Expr::Kind::kIndex : Expr::Kind::kSlice);
    e->args.push_back(std::move(subject));
    if (colons == 0) {
      if (parts[0] == nullptr) return absl::InvalidArgumentError("jinja: empty subscript");
      e->args.push_back(std::move(parts[0]));
    } else {
      for (ExprPtr& p : parts) e->args.push_back(std::move(p));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> postfix() {
    ASSIGN_OR_RETURN(ExprPtr e, primary());
    while (true) {
      if (accept_op(".")) {
        auto a = make(Expr::Kind::kAttr);
        ASSIGN_OR_RETURN(a->name, name());
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (accept_op("[")) {
        ASSIGN_OR_RETURN(e, subscript(std::move(e)));
      } else if (accept_op("(")) {
        auto c = make(Expr::Kind::kCall);
        c->args.push_back(std::move(e));
        RETURN_IF_ERROR(call_args(*c));
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  absl::StatusOr<ExprPtr> sequence(std::string_view close, Expr::Kind kind) {
    auto e = make(kind);
    while (!accept_op(close)) {
      if (kind == Expr::Kind::kDict) {
        if (peek().kind != Token::Kind::kString) {
          return absl::UnimplementedError("jinja: dict keys other than string literals");
        }
        std::string key = tokens_[pos_++].text;
        RETURN_IF_ERROR(expect_op(":"));
        ASSIGN_OR_RETURN(ExprPtr value, expression());
        e->kwargs.emplace_back(std::move(key), std::move(value));
      } else {
        ASSIGN_OR_RETURN(ExprPtr value, expression());
        e->args.push_back(std::move(value));
      }
      if (!accept_op(",")) {
        RETURN_IF_ERROR(expect_op(close));
        break;
      }
    }
    return e;
  }

  absl::StatusOr<ExprPtr> primary() {
    const Token t = peek();
    if (t.kind == Token::Kind::kEnd) return absl::InvalidArgumentError("jinja: expression expected");
    ++pos_;
    auto lit = make(Expr::Kind::kLiteral);
    switch (t.kind) {
      case Token::Kind::kString: {
        std::string s = t.text;
        while (peek().kind == Token::Kind::kString) s += tokens_[pos_++].text;  // 'a' 'b'
        lit->literal = Value::string(std::move(s));
        return lit;
      }
      case Token::Kind::kInt: {
        int64_t v = 0;
        for (char c : t.text) {
          if (c == '_') continue;
          if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, c - '0', &v)) {
            return absl::InvalidArgumentError(absl::StrCat("jinja: integer literal ", t.text, " is too large"));
          }
        }
        lit->literal = Value::integer(v);
        return lit;
      }
      case Token::Kind::kFloat:
        lit->literal = Value::number(std::strtod(t.text.c_str(), nullptr));
        return lit;
      case Token::Kind::kName:
        if (t.text == "true" || t.text == "True") { lit->literal = Value::boolean(true); return lit; }
        if (t.text == "false" || t.text == "False") { lit->literal = Value::boolean(false); return lit; }
        if (t.text == "none" || t.text == "None") { lit->literal = Value::none(); return lit; }
        return make(Expr::Kind::kName, t.text);
      default:
        break;
    }
    if (t.text == "(") {
      if (accept_op(")")) return make(Expr::Kind::kList);  // () : an empty tuple
      ASSIGN_OR_RETURN(ExprPtr inner, expression());
      if (!accept_op(",")) {
        RETURN_IF_ERROR(expect_op(")"));
        return inner;
      }
      // A tuple: behaves as a list for everything templates do with one.
      ASSIGN_OR_RETURN(ExprPtr rest, sequence(")", Expr::Kind::kList));
      rest->args.insert(rest->args.begin(), std::move(inner));
      return rest;
    }
    if (t.text == "[") return sequence("]", Expr::Kind::kList);
    if (t.text == "{") return sequence("}", Expr::Kind::kDict);
    return absl::InvalidArgumentError(absl::StrCat("jinja: unexpected '", t.text, "'"));
  }

  static constexpr int kMaxDepth = 64;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

absl::StatusOr<ExprPtr> parse_expression(std::string_view s) {
  ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(s));
  ExprParser p(std::move(tokens));
  ASSIGN_OR_RETURN(ExprPtr e, p.expression());
  if (!p.at_end()) return absl::InvalidArgumentError(absl::StrCat("jinja: unexpected '", p.peek().text, "'"));
  return e;
}

// ---- statements ----

class StmtParser {
 public:
  explicit StmtParser(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}

  // Statements up to one of `ends` (a block keyword); *end gets the keyword met ("" at EOF).
  absl::Status block(std::vector<Stmt>& out, std::initializer_list<std::string_view> ends,
                     std::string* end, std::string* rest) {
    if (++depth_ > kMaxDepth) return absl::InvalidArgumentError("jinja: blocks nested too deeply");
    absl::Status st = block_inner(out, ends, end, rest);
    --depth_;
    return st;
  }

 private:
  static constexpr int kMaxDepth = 64;

  absl::Status block_inner(std::vector<Stmt>& out, std::initializer_list<std::string_view> ends,
                           std::string* end, std::string* rest) {
    while (pos_ < pieces_.size()) {
      const Piece& p = pieces_[pos_++];
      if (p.kind == Piece::Kind::kText) {
        Stmt s;
        s.text = p.content;
        out.push_back(std::move(s));
        continue;
      }
      if (p.kind == Piece::Kind::kOutput) {
        Stmt s;
        s.kind = Stmt::Kind::kOutput;
        auto e = parse_expression(p.content);
        if (!e.ok()) {
          return absl::Status(e.status().code(), absl::StrCat("line ", p.line, ": ", e.status().message()));
        }
        s.expr = *std::move(e);
        out.push_back(std::move(s));
        continue;
      }
      std::string_view content = p.content;
      while (!content.empty() && is_space(content.front())) content.remove_prefix(1);
      size_t kw_end = 0;
      while (kw_end < content.size() && (std::isalnum(static_cast<unsigned char>(content[kw_end])) || content[kw_end] == '_')) ++kw_end;
      const std::string keyword(content.substr(0, kw_end));
      const std::string_view args = content.substr(kw_end);
      for (std::string_view e : ends) {
        if (keyword == e) {
          *end = keyword;
          *rest = std::string(args);
          return absl::OkStatus();
        }
      }
      absl::Status st = statement(keyword, args, out);
      if (!st.ok()) {
        if (absl::StartsWith(st.message(), "line ")) return st;  // from a nested block
        return absl::Status(st.code(), absl::StrCat("line ", p.line, ": ", st.message()));
      }
    }
    *end = "";
    return absl::OkStatus();
  }

  absl::Status expect_end(const std::string& got, std::string_view want) {
    if (got == want) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("jinja: expected {% ", std::string(want), " %}", got.empty() ? " before the end" : ", got " + got));
  }

  absl::Status statement(const std::string& keyword, std::string_view args, std::vector<Stmt>& out) {
    Stmt s;
    std::string end, rest;
    if (keyword == "if") {
      s.kind = Stmt::Kind::kIf;
      std::string cond(args);
      while (true) {
        ASSIGN_OR_RETURN(ExprPtr c, parse_expression(cond));
        std::vector<Stmt> body;
        RETURN_IF_ERROR(block(body, {"elif", "else", "endif"}, &end, &rest));
        s.branches.emplace_back(std::move(c), std::move(body));
        if (end == "elif") {
          cond = rest;
          continue;
        }
        if (end == "else") {
          std::vector<Stmt> else_body;
          RETURN_IF_ERROR(block(else_body, {"endif"}, &end, &rest));
          s.branches.emplace_back(nullptr, std::move(else_body));
        }
        RETURN_IF_ERROR(expect_end(end, "endif"));
        break;
      }
    } else if (keyword == "for") {
      RETURN_IF_ERROR(for_statement(args, s));
    } else if (keyword == "set") {
      RETURN_IF_ERROR(set_statement(args, s));
    } else if (keyword == "filter") {  // {% filter f(args) | g %}...{% endfilter %}
      s.kind = Stmt::Kind::kFilterBlock;
      ASSIGN_OR_RETURN(s.expr, parse_expression(absl::StrCat(kFilterBody, " | ", std::string(args))));
      RETURN_IF_ERROR(block(s.body, {"endfilter"}, &end, &rest));
      RETURN_IF_ERROR(expect_end(end, "endfilter"));
    } else if (keyword == "macro") {
      RETURN_IF_ERROR(macro_statement(args, s));
    } else if (keyword == "break" || keyword == "continue") {
      s.kind = keyword == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    } else {
      return absl::UnimplementedError(absl::StrCat("jinja: {% ", keyword, " %} is not supported"));
    }
    out.push_back(std::move(s));
    return absl::OkStatus();
  }

  absl::Status for_statement(std::string_view args, Stmt& s) {
    s.kind = Stmt::Kind::kFor;
    ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(args));
    ExprParser p(std::move(tokens));
    do {
      ASSIGN_OR_RETURN(std::string var, p.name());
      s.target.push_back(std::move(var));
    } while (p.accept_op(","));
    if (!p.accept_name("in")) return absl::InvalidArgumentError("jinja: for without 'in'");
    // The iterable is parsed without the ternary so that "for x in xs if cond" works.
    ASSIGN_OR_RETURN(s.expr, p.expression());
    if (s.expr->kind == Expr::Kind::kTernary && s.expr->args[2] == nullptr) {
      s.condition = std::move(s.expr->args[1]);
      s.expr = std::move(s.expr->args[0]);
    }
    if (p.accept_name("recursive")) return absl::UnimplementedError("jinja: recursive loops");
    if (!p.at_end()) return absl::InvalidArgumentError("jinja: unexpected text after the for loop");
    std::string end, rest;
    RETURN_IF_ERROR(block(s.body, {"else", "endfor"}, &end, &rest));
    if (end == "else") RETURN_IF_ERROR(block(s.else_body, {"endfor"}, &end, &rest));
    return expect_end(end, "endfor");
  }

  absl::Status macro_statement(std::string_view args, Stmt& s) {
    s.kind = Stmt::Kind::kMacro;
    ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(args));
    ExprParser p(std::move(tokens));
    ASSIGN_OR_RETURN(std::string name, p.name());
    s.target.push_back(std::move(name));
    RETURN_IF_ERROR(p.expect_op("("));
    while (!p.accept_op(")")) {
      ASSIGN_OR_RETURN(std::string param, p.name());
      s.target.push_back(std::move(param));
      std::unique_ptr<Expr> dflt;
      if (p.accept_op("=")) {
        ASSIGN_OR_RETURN(dflt, p.expression());
      }
      s.defaults.push_back(std::move(dflt));
      if (!p.accept_op(",")) {
        RETURN_IF_ERROR(p.expect_op(")"));
        break;
      }
    }
    if (!p.at_end()) return absl::InvalidArgumentError("jinja: unexpected text after the macro");
    std::string end, rest;
    RETURN_IF_ERROR(block(s.body, {"endmacro"}, &end, &rest));
    return expect_end(end, "endmacro");
  }

  absl::Status set_statement(std::string_view args, Stmt& s) {
    ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(args));
    ExprParser p(std::move(tokens));
    ASSIGN_OR_RETURN(std::string target, p.name());
    s.target.push_back(std::move(target));
    if (p.accept_op(".")) {
      ASSIGN_OR_RETURN(std::string attr, p.name());
      s.target.push_back(std::move(attr));
    }
    if (p.peek().kind == Token::Kind::kOp && p.peek().text == ",") {
      return absl::UnimplementedError("jinja: {% set a, b = ... %}");
    }
    if (p.at_end()) {  // {% set x %}...{% endset %}
      s.kind = Stmt::Kind::kSetBlock;
      std::string end, rest;
      RETURN_IF_ERROR(block(s.body, {"endset"}, &end, &rest));
      return expect_end(end, "endset");
    }
    s.kind = Stmt::Kind::kSet;
    RETURN_IF_ERROR(p.expect_op("="));
    ASSIGN_OR_RETURN(s.expr, p.expression());
    if (!p.at_end()) return absl::InvalidArgumentError("jinja: unexpected text after set");
    return absl::OkStatus();
  }

  std::vector<Piece> pieces_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<std::vector<Stmt>> parse_template(std::string_view source) {
  ASSIGN_OR_RETURN(std::vector<Piece> pieces, cut(source));
  StmtParser parser(std::move(pieces));
  std::vector<Stmt> body;
  std::string end, rest;
  RETURN_IF_ERROR(parser.block(body, {"endif", "endfor", "elif", "else", "endset", "endmacro", "endfilter"}, &end, &rest));
  if (!end.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("jinja: {% ", end, " %} without its opening tag"));
  }
  return body;
}

}  // namespace flashserve::model::jinja
