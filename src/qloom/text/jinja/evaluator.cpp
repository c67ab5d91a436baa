// Expression evaluation for the Renderer.
#include "qloom/text/jinja/renderer.h"

namespace qloom::text::jinja {

Value Renderer::eval(const Expr& e) {
  try {
    const Frame frame(*this);
    return eval_expr(e);
  } catch (const EvalError& err) {
    fail_at(e.pos, err);
  }
}

CallArgs Renderer::eval_args(const Expr& e, size_t first) {
  CallArgs a;
  for (size_t i = first; i < e.kids.size(); ++i) a.args.push_back(eval(*e.kids[i]));
  for (const auto& [k, v] : e.kwargs) a.kwargs.emplace_back(k, eval(*v));
  return a;
}

Value Renderer::eval_call(const Expr& e) {
  Value callee = eval(*e.kids[0]);
  CallArgs a = eval_args(e, 1);
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_callable()) eval_fail("'" + callee.type_name() + "' object is not callable");
  return callee.as_function()(a);
}

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.kids[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.kids[i + 1]);
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") r = left.equals(right);
    else if (op == "!=") r = !left.equals(right);
    else if (op == "<") r = py_less(left, right);
    else if (op == ">") r = py_less(right, left);
    else if (op == "<=") r = !py_less(right, left);
    else if (op == ">=") r = !py_less(left, right);
    else if (op == "in") r = contains(right, left);
    else r = !contains(right, left);
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

namespace {

Value unary(const std::string& op, const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return Value(op == "-" ? -v.as_double() : v.as_double());
  if (v.is_int() || v.is_bool()) {
    if (op == "-" && v.as_int() == INT64_MIN) fail_overflow("-(" + std::to_string(v.as_int()) + ")");
    return Value(op == "-" ? -v.as_int() : v.as_int());
  }
  eval_fail("bad operand type for unary " + op + ": '" + v.type_name() + "'");
}

}  // namespace

Value Renderer::eval_expr(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.value;
    case Expr::Kind::kName: return lookup(e.name);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List items;
      for (const auto& k : e.kids) items.push_back(eval(*k));
      return Value::list(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        Value key = eval(*e.kids[i]);
        if (!key.is_string())
          throw EvalError(ErrorKind::kUnsupported, "dict literal keys must be strings, not " + key.type_name());
        d.set(key.as_string(), eval(*e.kids[i + 1]));
      }
      return Value::dict(std::move(d));
    }
    case Expr::Kind::kAttr: return get_attr(eval(*e.kids[0]), e.name);
    case Expr::Kind::kItem: {
      Value obj = eval(*e.kids[0]);
      return get_item(obj, eval(*e.kids[1]));
    }
    case Expr::Kind::kSlice: {
      Value obj = eval(*e.kids[0]);
      auto bound = [&](size_t i) { return e.kids[i] ? eval(*e.kids[i]) : Value::none(); };
      Value start = bound(1), stop = bound(2), step = bound(3);
      return get_slice(obj, start, stop, step);
    }
    case Expr::Kind::kCall: return eval_call(e);
    case Expr::Kind::kFilter: {
      Value input = eval(*e.kids[0]);
      return call_filter(e.name, input, eval_args(e, 1));
    }
    case Expr::Kind::kTest: {
      Value input = eval(*e.kids[0]);
      bool r = call_test(e.name, input, eval_args(e, 1));
      return Value(e.negated ? !r : r);
    }
    case Expr::Kind::kUnary: return unary(e.name, eval(*e.kids[0]));
    case Expr::Kind::kNot: return Value(!eval(*e.kids[0]).truthy());
    case Expr::Kind::kBinary: {
      Value a = eval(*e.kids[0]);
      return binary_op(e.name, a, eval(*e.kids[1]));
    }
    case Expr::Kind::kCompare: return eval_compare(e);
    case Expr::Kind::kAnd: {
      Value a = eval(*e.kids[0]);
      return a.truthy() ? eval(*e.kids[1]) : a;
    }
    case Expr::Kind::kOr: {
      Value a = eval(*e.kids[0]);
      return a.truthy() ? a : eval(*e.kids[1]);
    }
    case Expr::Kind::kCond: {
      if (eval(*e.kids[0]).truthy()) return eval(*e.kids[1]);
      if (e.kids[2]) return eval(*e.kids[2]);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
  }
  return {};
}

}  // namespace qloom::text::jinja
