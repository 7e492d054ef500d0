#pragma once
// The syntax tree of model/text/jinja.h (internal to jinja_parse.cc and jinja_eval.cc).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/text/jinja.h"

namespace flashserve::model::jinja {

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kAttr,     // args[0].name
    kIndex,    // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (null parts omitted)
    kCall,     // args[0](args[1:], kwargs); a method call when args[0] is kAttr
    kFilter,   // args[0] | name(args[1:], kwargs)
    kTest,     // args[0] is [not] name(args[1:])
    kUnary,    // name ("not", "-") args[0]
    kBinary,   // args[0] name args[1]; "and"/"or" short-circuit
    kTernary,  // args[0] if args[1] else args[2] (args[2] may be null)
    kList,     // [args...]
    kDict,     // {kwargs...} with literal string keys
  };
  Kind kind = Kind::kLiteral;
  std::string name;
  Value literal;
  bool negate = false;  // "is not", "not in"
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
};

inline constexpr char kFilterBody[] = "__filter_block_body__";

struct Stmt {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kBreak, kContinue, kMacro,
                    kFilterBlock };
  Kind kind = Kind::kText;
  std::string text;                 // kText
  // kOutput, kSet value, kFor iterable; kFilterBlock: the filters applied to the name
  // kFilterBody, which holds the block's output
  std::unique_ptr<Expr> expr;
  // kSet: {name} or {namespace, attr}; kFor: loop variables; kMacro: {name, parameters...}
  std::vector<std::string> target;
  std::vector<std::unique_ptr<Expr>> defaults;  // kMacro: per parameter, null if none
  std::unique_ptr<Expr> condition;  // kFor: the "if" filter
  // kIf: (condition, body) in order; the else branch has a null condition.
  std::vector<std::pair<std::unique_ptr<Expr>, std::vector<Stmt>>> branches;
  std::vector<Stmt> body;       // kFor, kSetBlock, kMacro, kFilterBlock
  std::vector<Stmt> else_body;  // kFor
};

}  // namespace flashserve::model::jinja
