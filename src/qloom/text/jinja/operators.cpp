// Python's arithmetic, concatenation and membership on template values.
#include <cmath>

#include "qloom/text/jinja/renderer.h"

namespace qloom::text::jinja {
namespace {

bool numeric(const Value& v) { return v.is_number() || v.is_bool(); }

[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  if (op == "+" && a.is_string())
    eval_fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
  if (op == "+" && a.is_list())
    eval_fail("can only concatenate list (not \"" + b.type_name() + "\") to list");
  eval_fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return out;
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::list(std::move(out), seq.is_tuple());
}

Value sequence_op(const std::string& op, const Value& a, const Value& b, bool& done) {
  done = true;
  if (op == "+" && a.is_string() && b.is_string()) return a.as_string() + b.as_string();
  if (op == "+" && a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value::list(std::move(out), a.is_tuple());
  }
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  done = false;
  return {};
}

Value int_op(const std::string& op, int64_t x, int64_t y) {
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "/") {
    if (y == 0) eval_fail("division by zero");
    return Value(static_cast<double>(x) / static_cast<double>(y));
  }
  if (y == 0 && (op == "//" || op == "%")) eval_fail("integer division or modulo by zero");
  if (op == "//") return Value(x / y - ((x % y != 0 && ((x < 0) != (y < 0))) ? 1 : 0));
  if (op == "%") {
    int64_t r = x % y;
    return Value(r != 0 && ((r < 0) != (y < 0)) ? r + y : r);
  }
  if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
  int64_t r = 1;
  for (int64_t i = 0; i < y; ++i) r *= x;
  return Value(r);
}

Value float_op(const std::string& op, double x, double y) {
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  if (y == 0) eval_fail(op == "/" ? "float division by zero" : op == "//" ? "float floor division by zero" : "float modulo");
  if (op == "/") return Value(x / y);
  if (op == "//") return Value(std::floor(x / y));
  double r = std::fmod(x, y);
  return Value(r != 0 && ((r < 0) != (y < 0)) ? r + y : r);
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return a.str() + b.str();
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  bool done = false;
  Value seq = sequence_op(op, a, b, done);
  if (done) return seq;
  if (!numeric(a) || !numeric(b)) bad_operands(op, a, b);
  if (a.is_float() || b.is_float()) return float_op(op, a.as_double(), b.as_double());
  return int_op(op, a.as_int(), b.as_int());
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) eval_fail("'in <string>' requires string as left operand, not " + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict() && !container.is_namespace()) {
    return item.is_string() && container.as_dict().find(item.as_string()) != nullptr;
  }
  if (container.is_list() || container.is_undefined()) {
    for (const auto& x : iterate(container))
      if (x.equals(item)) return true;
    return false;
  }
  eval_fail("argument of type '" + container.type_name() + "' is not iterable");
}

}  // namespace qloom::text::jinja
