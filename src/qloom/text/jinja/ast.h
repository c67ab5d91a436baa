// The Jinja syntax tree: expressions and statements, as the parser builds them
// and the renderer walks them. `pos` is a byte offset into the template source.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qloom/text/jinja/value.h"

namespace qloom::text::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // kids
    kTuple,     // kids
    kDict,      // kids: key0, value0, key1, value1...
    kAttr,      // kids[0].name
    kItem,      // kids[0][kids[1]]
    kSlice,     // kids[0][kids[1]:kids[2]:kids[3]] (null kids are omitted bounds)
    kCall,      // kids[0](kids[1..], kwargs)
    kFilter,    // kids[0] | name(kids[1..], kwargs)
    kTest,      // kids[0] is [not] name(kids[1..], kwargs); negated
    kUnary,     // op kids[0]: "-", "+"
    kNot,       // not kids[0]
    kBinary,    // kids[0] op kids[1]: + - * / // % ** ~
    kCompare,   // kids[0] ops[0] kids[1] ops[1] kids[2]...: == != < > <= >= in notin
    kAnd,       // kids[0] and kids[1]
    kOr,        // kids[0] or kids[1]
    kCond,      // kids[1] if kids[0] else kids[2] (kids[2] null: undefined)
  };
  Kind kind;
  size_t pos = 0;
  Value value;
  std::string name;  // name, attribute, filter or test name, operator
  bool negated = false;
  std::vector<std::string> ops;
  std::vector<ExprPtr> kids;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // conds[i] -> bodies[i]; else_body
    kFor,        // for targets in expr [if cond]: body; else_body
    kSet,        // set targets = expr   |  set targets[0].attr = expr (attr non-empty)
    kSetBlock,   // set targets[0] %}body{% endset
    kBreak,
    kContinue,
    kMacro,      // macro name(params = defaults): body
    kCallBlock,  // call expr: body (the body is caller())
    kGeneration, // transformers' {% generation %}: renders its body
  };
  Kind kind;
  size_t pos = 0;
  std::string text;
  std::string name;  // macro name
  std::string attr;  // set ns.attr
  ExprPtr expr;
  ExprPtr cond;      // for-loop filter
  std::vector<std::string> targets;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null when none
};

}  // namespace qloom::text::jinja
