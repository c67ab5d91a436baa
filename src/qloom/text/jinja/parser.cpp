#include "qloom/text/jinja/parser.h"

#include <algorithm>
#include <initializer_list>

#include "qloom/core/error.h"
#include "qloom/text/jinja/runtime.h"

namespace qloom::text::jinja {
namespace {

ExprPtr make_expr(Expr::Kind kind, size_t pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

NodePtr make_node(Node::Kind kind, size_t pos) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->pos = pos;
  return n;
}

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::kText: return "template text";
    case Tok::kVarBegin: return "'{{'";
    case Tok::kVarEnd: return "end of print statement '}}'";
    case Tok::kBlockBegin: return "'{%'";
    case Tok::kBlockEnd: return "end of statement block '%}'";
    case Tok::kString: return "string literal";
    case Tok::kEof: return "end of template";
    default: return "'" + t.text + "'";
  }
}

class Parser {
 public:
  Parser(const Source& src, std::vector<Token> toks) : src_(src), toks_(std::move(toks)) {}

  Body parse_template() {
    std::string which;
    return parse_body({}, "", 0, &which);
  }

 private:
  const Token& cur() const { return toks_[i_]; }
  Value number_literal(const Token& t) const {
    try {
      if (t.type == Tok::kInt) return Value(static_cast<int64_t>(std::stoll(t.text)));
      return Value(std::stod(t.text));
    } catch (const std::exception&) {
      syntax_error(src_, t.pos, "number literal '" + t.text + "' is out of range (integers are 64-bit)");
    }
  }
  const Token& peek(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  bool is_op(const char* op) const { return cur().type == Tok::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::kName && cur().text == n; }
  [[noreturn]] void fail(const std::string& msg) const { syntax_error(src_, cur().pos, msg); }
  [[noreturn]] void unexpected() const { fail("unexpected " + describe(cur())); }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', got " + describe(cur()));
    ++i_;
  }
  void expect_end() {
    if (cur().type != Tok::kBlockEnd) fail("expected end of statement block '%}', got " + describe(cur()));
    ++i_;
  }
  std::string expect_name() {
    if (cur().type != Tok::kName) fail("expected a name, got " + describe(cur()));
    return toks_[i_++].text;
  }

  Body parse_body(std::initializer_list<const char*> ends, const std::string& open_tag, size_t open_pos,
                  std::string* which);
  NodePtr parse_statement();
  NodePtr parse_if(size_t pos);
  NodePtr parse_for(size_t pos);
  NodePtr parse_set(size_t pos);
  NodePtr parse_macro(size_t pos);
  NodePtr parse_wrapped(Node::Kind kind, size_t pos, const char* tag, const char* end_tag);

  ExprPtr parse_expression(bool with_cond = true);
  ExprPtr parse_keyword_chain(const char* keyword, Expr::Kind kind, ExprPtr (Parser::*operand)());
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_binary(int level);
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filters(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr e);
  void parse_call_args(Expr& call);
  ExprPtr parse_sequence(Expr::Kind kind, const char* close, size_t pos);

  const Source& src_;
  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;  // nested blocks + expressions being parsed (kMaxDepth)
  // Counts one level of nesting for its lifetime; past kMaxDepth the template
  // is refused rather than parsed (and later evaluated) by ever deeper recursion.
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail("blocks or expressions nested more than " + std::to_string(kMaxDepth) + " deep");
    }
    ~Nest() { --p.depth_; }
  };
  // A left-associative chain (a.b[c]|f|g, a + b + c, a or b) is a tree as deep
  // as it is long: each link counts one level until the chain ends.
  struct Chain {
    Parser& p;
    int links = 0;
    void link() {
      ++links;
      if (++p.depth_ > kMaxDepth)
        p.fail("expression chained or nested more than " + std::to_string(kMaxDepth) + " deep");
    }
    ~Chain() { p.depth_ -= links; }
  };
  static constexpr int kMaxDepth = 256;
};

Body Parser::parse_body(std::initializer_list<const char*> ends, const std::string& open_tag,
                        size_t open_pos, std::string* which) {
  const Nest nest(*this);
  Body body;
  for (;;) {
    const Token& t = cur();
    if (t.type == Tok::kEof) {
      if (ends.size() == 0) return body;
      std::string want;
      for (const char* e : ends) want += std::string(want.empty() ? "" : " or ") + "'" + e + "'";
      syntax_error(src_, open_pos, "unexpected end of template: '" + open_tag + "' is never closed (expected " +
                                       want + ")");
    }
    if (t.type == Tok::kText) {
      auto n = make_node(Node::Kind::kText, t.pos);
      n->text = t.text;
      body.push_back(std::move(n));
      ++i_;
    } else if (t.type == Tok::kVarBegin) {
      auto n = make_node(Node::Kind::kOutput, t.pos);
      ++i_;
      n->expr = parse_expression();
      if (cur().type != Tok::kVarEnd) fail("expected end of print statement '}}', got " + describe(cur()));
      ++i_;
      body.push_back(std::move(n));
    } else if (t.type == Tok::kBlockBegin) {
      const Token& tag = peek();
      for (const char* e : ends) {
        if (tag.type == Tok::kName && tag.text == e) {
          i_ += 2;
          *which = e;
          return body;
        }
      }
      ++i_;
      body.push_back(parse_statement());
    } else {
      unexpected();
    }
  }
}

NodePtr Parser::parse_statement() {
  size_t pos = cur().pos;
  if (cur().type != Tok::kName) fail("expected a tag name after '{%', got " + describe(cur()));
  std::string tag = cur().text;
  ++i_;
  if (tag == "if") return parse_if(pos);
  if (tag == "for") return parse_for(pos);
  if (tag == "set") return parse_set(pos);
  if (tag == "macro") return parse_macro(pos);
  if (tag == "break" || tag == "continue") {
    expect_end();
    return make_node(tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, pos);
  }
  if (tag == "generation") return parse_wrapped(Node::Kind::kGeneration, pos, "generation", "endgeneration");
  if (tag == "call") return parse_wrapped(Node::Kind::kCallBlock, pos, "call", "endcall");
  static const char* kUnsupported[] = {"extends", "block", "include", "import", "from",
                                       "with", "filter", "autoescape", "do", "print"};
  for (const char* u : kUnsupported) {
    if (tag == u)
      throw Error(ErrorKind::kUnsupported, src_.name, src_.where(pos), "unsupported tag '" + tag + "'",
                  "chat templates may use if, for, set, macro, call, break, continue, raw and generation");
  }
  if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else")
    syntax_error(src_, pos, "unexpected '" + tag + "': no open block to close or continue");
  syntax_error(src_, pos, "unknown tag '" + tag + "'");
}

NodePtr Parser::parse_if(size_t pos) {
  auto n = make_node(Node::Kind::kIf, pos);
  std::string which = "elif";
  while (which == "elif") {
    n->conds.push_back(parse_expression());
    expect_end();
    n->bodies.push_back(parse_body({"elif", "else", "endif"}, "if", pos, &which));
  }
  if (which == "else") {
    expect_end();
    n->else_body = parse_body({"endif"}, "if", pos, &which);
  }
  expect_end();
  return n;
}

NodePtr Parser::parse_for(size_t pos) {
  auto n = make_node(Node::Kind::kFor, pos);
  bool paren = is_op("(");
  if (paren) ++i_;
  n->targets.push_back(expect_name());
  while (is_op(",")) {
    ++i_;
    n->targets.push_back(expect_name());
  }
  if (paren) expect_op(")");
  if (!is_name("in")) fail("expected 'in' in for loop, got " + describe(cur()));
  ++i_;
  n->expr = parse_expression(false);
  if (is_name("if")) {
    ++i_;
    n->cond = parse_expression(false);
  }
  if (is_name("recursive"))
    throw Error(ErrorKind::kUnsupported, src_.name, src_.where(cur().pos), "recursive for loops are not supported");
  expect_end();
  std::string which;
  n->body = parse_body({"else", "endfor"}, "for", pos, &which);
  if (which == "else") {
    expect_end();
    n->else_body = parse_body({"endfor"}, "for", pos, &which);
  }
  expect_end();
  return n;
}

NodePtr Parser::parse_set(size_t pos) {
  auto n = make_node(Node::Kind::kSet, pos);
  n->targets.push_back(expect_name());
  if (is_op(".")) {
    ++i_;
    n->attr = expect_name();
  }
  while (n->attr.empty() && is_op(",")) {
    ++i_;
    n->targets.push_back(expect_name());
  }
  if (cur().type == Tok::kBlockEnd && n->attr.empty() && n->targets.size() == 1) {
    ++i_;
    n->kind = Node::Kind::kSetBlock;
    std::string which;
    n->body = parse_body({"endset"}, "set", pos, &which);
    expect_end();
    return n;
  }
  expect_op("=");
  n->expr = parse_expression();
  if (is_op(",")) {  // set a = 1, 2: a tuple
    auto tuple = make_expr(Expr::Kind::kTuple, n->expr->pos);
    tuple->kids.push_back(std::move(n->expr));
    while (is_op(",")) {
      ++i_;
      tuple->kids.push_back(parse_expression());
    }
    n->expr = std::move(tuple);
  }
  expect_end();
  return n;
}

NodePtr Parser::parse_macro(size_t pos) {
  auto n = make_node(Node::Kind::kMacro, pos);
  n->name = expect_name();
  expect_op("(");
  while (!is_op(")")) {
    n->params.push_back(expect_name());
    ExprPtr def;
    if (is_op("=")) {
      ++i_;
      def = parse_expression();
    }
    n->defaults.push_back(std::move(def));
    if (!is_op(")")) expect_op(",");
  }
  ++i_;
  expect_end();
  std::string which;
  n->body = parse_body({"endmacro"}, "macro", pos, &which);
  expect_end();
  return n;
}

// {% call expr %}...{% endcall %} and {% generation %}...{% endgeneration %}.
NodePtr Parser::parse_wrapped(Node::Kind kind, size_t pos, const char* tag, const char* end_tag) {
  auto n = make_node(kind, pos);
  if (kind == Node::Kind::kCallBlock) n->expr = parse_expression();
  expect_end();
  std::string which;
  n->body = parse_body({end_tag}, tag, pos, &which);
  expect_end();
  return n;
}

// ---- expressions ----

ExprPtr Parser::parse_expression(bool with_cond) {
  const Nest nest(*this);
  ExprPtr e = parse_or();
  if (!with_cond || !is_name("if")) return e;
  auto c = make_expr(Expr::Kind::kCond, cur().pos);
  ++i_;
  c->kids.push_back(parse_or());
  c->kids.push_back(std::move(e));
  if (is_name("else")) {
    ++i_;
    c->kids.push_back(parse_expression());
  } else {
    c->kids.push_back(nullptr);
  }
  return c;
}

// operand (keyword operand)*, left-associative: the `or` and `and` levels.
ExprPtr Parser::parse_keyword_chain(const char* keyword, Expr::Kind kind, ExprPtr (Parser::*operand)()) {
  ExprPtr e = (this->*operand)();
  Chain chain{*this};
  while (is_name(keyword)) {
    chain.link();
    auto n = make_expr(kind, cur().pos);
    ++i_;
    n->kids.push_back(std::move(e));
    n->kids.push_back((this->*operand)());
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_or() { return parse_keyword_chain("or", Expr::Kind::kOr, &Parser::parse_and); }

ExprPtr Parser::parse_and() { return parse_keyword_chain("and", Expr::Kind::kAnd, &Parser::parse_not); }

ExprPtr Parser::parse_not() {
  if (!is_name("not")) return parse_compare();
  const Nest nest(*this);
  auto n = make_expr(Expr::Kind::kNot, cur().pos);
  ++i_;
  n->kids.push_back(parse_not());
  return n;
}

ExprPtr Parser::parse_compare() {
  ExprPtr first = parse_binary(0);
  ExprPtr cmp;
  for (;;) {
    std::string op;
    const Token& t = cur();
    if (t.type == Tok::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" ||
                               t.text == "<=" || t.text == ">=")) {
      op = t.text;
      ++i_;
    } else if (is_name("in")) {
      op = "in";
      ++i_;
    } else if (is_name("not") && peek().type == Tok::kName && peek().text == "in") {
      op = "notin";
      i_ += 2;
    } else {
      break;
    }
    if (!cmp) {
      cmp = make_expr(Expr::Kind::kCompare, first->pos);
      cmp->kids.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->kids.push_back(parse_binary(0));
  }
  return cmp ? std::move(cmp) : std::move(first);
}

// Levels: 0 "+ -", 1 "~", 2 "* / // %", 3 "**", then unary.
ExprPtr Parser::parse_binary(int level) {
  static const std::vector<std::vector<std::string>> kOps = {{"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
  if (level == 4) return parse_unary(true);
  ExprPtr e = parse_binary(level + 1);
  Chain chain{*this};
  for (;;) {
    const auto& ops = kOps[static_cast<size_t>(level)];
    if (cur().type != Tok::kOp || std::find(ops.begin(), ops.end(), cur().text) == ops.end()) return e;
    chain.link();
    auto b = make_expr(Expr::Kind::kBinary, cur().pos);
    b->name = cur().text;
    ++i_;
    b->kids.push_back(std::move(e));
    b->kids.push_back(parse_binary(level + 1));
    e = std::move(b);
  }
}

ExprPtr Parser::parse_unary(bool with_filter) {
  const Nest nest(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = make_expr(Expr::Kind::kUnary, cur().pos);
    e->name = cur().text;
    ++i_;
    e->kids.push_back(parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  return with_filter ? parse_filters(std::move(e)) : std::move(e);
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  size_t pos = t.pos;
  if (t.type == Tok::kName) {
    ++i_;
    auto e = make_expr(Expr::Kind::kLiteral, pos);
    if (t.text == "true" || t.text == "True") e->value = Value(true);
    else if (t.text == "false" || t.text == "False") e->value = Value(false);
    else if (t.text == "none" || t.text == "None") e->value = Value::none();
    else {
      e->kind = Expr::Kind::kName;
      e->name = t.text;
    }
    return e;
  }
  if (t.type == Tok::kString) {
    std::string s;
    while (cur().type == Tok::kString) s += toks_[i_++].text;
    auto e = make_expr(Expr::Kind::kLiteral, pos);
    e->value = Value(std::move(s));
    return e;
  }
  if (t.type == Tok::kInt || t.type == Tok::kFloat) {
    auto e = make_expr(Expr::Kind::kLiteral, pos);
    e->value = number_literal(t);
    ++i_;
    return e;
  }
  if (is_op("(")) {
    ++i_;
    if (is_op(")")) {
      ++i_;
      return make_expr(Expr::Kind::kTuple, pos);
    }
    ExprPtr e = parse_expression();
    if (is_op(",")) {
      auto tuple = make_expr(Expr::Kind::kTuple, pos);
      tuple->kids.push_back(std::move(e));
      while (is_op(",") && peek().text != ")") {
        ++i_;
        tuple->kids.push_back(parse_expression());
      }
      if (is_op(",")) ++i_;
      e = std::move(tuple);
    }
    expect_op(")");
    return e;
  }
  if (is_op("[")) return parse_sequence(Expr::Kind::kList, "]", pos);
  if (is_op("{")) return parse_sequence(Expr::Kind::kDict, "}", pos);
  unexpected();
}

// [a, b, ...] or {k: v, ...}; a trailing comma is allowed.
ExprPtr Parser::parse_sequence(Expr::Kind kind, const char* close, size_t pos) {
  auto e = make_expr(kind, pos);
  ++i_;
  while (!is_op(close)) {
    e->kids.push_back(parse_expression());
    if (kind == Expr::Kind::kDict) {
      expect_op(":");
      e->kids.push_back(parse_expression());
    }
    if (!is_op(close)) expect_op(",");
  }
  ++i_;
  return e;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  Chain chain{*this};
  for (;;) {
    if (is_op(".") || is_op("[") || is_op("(")) chain.link();
    if (is_op(".")) {
      auto a = make_expr(Expr::Kind::kAttr, cur().pos);
      ++i_;
      if (cur().type == Tok::kInt) {  // x.0 is x[0]
        a->kind = Expr::Kind::kItem;
        auto idx = make_expr(Expr::Kind::kLiteral, cur().pos);
        idx->value = number_literal(toks_[i_++]);
        a->kids.push_back(std::move(e));
        a->kids.push_back(std::move(idx));
      } else {
        a->name = expect_name();
        a->kids.push_back(std::move(e));
      }
      e = std::move(a);
    } else if (is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      auto c = make_expr(Expr::Kind::kCall, cur().pos);
      c->kids.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr e) {
  size_t pos = cur().pos;
  ++i_;
  ExprPtr start;
  if (!is_op(":")) start = parse_expression();
  if (!is_op(":")) {
    expect_op("]");
    auto item = make_expr(Expr::Kind::kItem, pos);
    item->kids.push_back(std::move(e));
    item->kids.push_back(std::move(start));
    return item;
  }
  auto s = make_expr(Expr::Kind::kSlice, pos);
  s->kids.push_back(std::move(e));
  s->kids.push_back(std::move(start));
  ++i_;
  s->kids.push_back(is_op(":") || is_op("]") ? nullptr : parse_expression());
  if (is_op(":")) {
    ++i_;
    s->kids.push_back(is_op("]") ? nullptr : parse_expression());
  } else {
    s->kids.push_back(nullptr);
  }
  expect_op("]");
  return s;
}

void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  while (!is_op(")")) {
    if (cur().type == Tok::kName && peek().type == Tok::kOp && peek().text == "=") {
      std::string key = cur().text;
      i_ += 2;
      call.kwargs.emplace_back(key, parse_expression());
    } else {
      if (!call.kwargs.empty()) fail("positional argument follows keyword argument");
      call.kids.push_back(parse_expression());
    }
    if (!is_op(")")) expect_op(",");
  }
  ++i_;
}

ExprPtr Parser::parse_filters(ExprPtr e) {
  Chain chain{*this};
  for (;;) {
    if (is_op("|") || is_name("is") || is_op("(")) chain.link();
    if (is_op("|")) {
      auto f = make_expr(Expr::Kind::kFilter, cur().pos);
      ++i_;
      size_t name_pos = cur().pos;
      f->name = expect_name();
      if (!is_filter(f->name)) syntax_error(src_, name_pos, "No filter named '" + f->name + "'.");
      f->kids.push_back(std::move(e));
      if (is_op("(")) parse_call_args(*f);
      e = std::move(f);
    } else if (is_name("is")) {
      auto t = make_expr(Expr::Kind::kTest, cur().pos);
      ++i_;
      if (is_name("not")) {
        t->negated = true;
        ++i_;
      }
      size_t name_pos = cur().pos;
      t->name = expect_name();
      if (!is_test(t->name)) syntax_error(src_, name_pos, "No test named '" + t->name + "'.");
      t->kids.push_back(std::move(e));
      Tok ty = cur().type;
      bool bare_arg = (ty == Tok::kName || ty == Tok::kString || ty == Tok::kInt || ty == Tok::kFloat ||
                       is_op("[") || is_op("{")) &&
                      !is_name("else") && !is_name("or") && !is_name("and");
      if (is_op("(")) parse_call_args(*t);
      else if (bare_arg) t->kids.push_back(parse_postfix(parse_primary()));
      e = std::move(t);
    } else if (is_op("(")) {
      auto c = make_expr(Expr::Kind::kCall, cur().pos);
      c->kids.push_back(std::move(e));
      parse_call_args(*c);
      e = std::move(c);
    } else {
      return e;
    }
  }
}

}  // namespace

Body parse(const Source& src, std::vector<Token> tokens) { return Parser(src, std::move(tokens)).parse_template(); }

}  // namespace qloom::text::jinja
