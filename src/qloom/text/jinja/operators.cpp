// Python's arithmetic, concatenation and membership on template values.
#include <cmath>

#include "qloom/text/jinja/budget.h"
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

// The bytes a list of `items` values takes, as max_value_bytes counts them.
size_t list_bytes(size_t items) { return items * sizeof(Value); }

Value repeat(const Value& seq, int64_t n) {
  const size_t unit = seq.is_string() ? seq.as_string().size() : list_bytes(seq.as_list().size());
  const size_t count = n > 0 ? static_cast<size_t>(n) : 0;
  size_t total = 0;
  if (__builtin_mul_overflow(unit, count, &total)) total = SIZE_MAX;
  check_value_size(total, seq.is_string() ? "a repeated string" : "a repeated list");
  if (seq.is_string()) {
    std::string out;
    out.reserve(unit * count);
    for (size_t i = 0; i < count; ++i) out += seq.as_string();
    return out;
  }
  List out;
  for (size_t i = 0; i < count; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::list(std::move(out), seq.is_tuple());
}

Value sequence_op(const std::string& op, const Value& a, const Value& b, bool& done) {
  done = true;
  if (op == "+" && a.is_string() && b.is_string()) {
    check_value_size(a.as_string().size() + b.as_string().size(), "a concatenated string");
    return a.as_string() + b.as_string();
  }
  if (op == "+" && a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    check_value_size(list_bytes(a.as_list().size() + b.as_list().size()), "a concatenated list");
    List out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return Value::list(std::move(out), a.is_tuple());
  }
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
  if (op == "*" && (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  done = false;
  return {};
}

std::string describe_op(int64_t x, const std::string& op, int64_t y) {
  return std::to_string(x) + " " + op + " " + std::to_string(y);
}

// x ** y for y >= 0 by squaring, every product checked.
Value int_pow(int64_t x, int64_t y) {
  int64_t r = 1, base = x;
  for (int64_t e = y; e > 0; e >>= 1) {
    if ((e & 1) && __builtin_mul_overflow(r, base, &r)) fail_overflow(describe_op(x, "**", y));
    if (e > 1 && __builtin_mul_overflow(base, base, &base)) fail_overflow(describe_op(x, "**", y));
  }
  return Value(r);
}

// Python's floor division and modulo; INT64_MIN // -1 overflows, % -1 is 0.
Value int_divmod(const std::string& op, int64_t x, int64_t y) {
  if (y == 0) eval_fail("integer division or modulo by zero");
  if (y == -1) {
    if (op == "%") return Value(int64_t{0});
    if (x == INT64_MIN) fail_overflow(describe_op(x, op, y));
    return Value(-x);
  }
  if (op == "//") return Value(x / y - ((x % y != 0 && ((x < 0) != (y < 0))) ? 1 : 0));
  int64_t r = x % y;
  return Value(r != 0 && ((r < 0) != (y < 0)) ? r + y : r);
}

Value int_op(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
  else if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
  else if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
  else if (op == "/") {
    if (y == 0) eval_fail("division by zero");
    return Value(static_cast<double>(x) / static_cast<double>(y));
  } else if (op == "//" || op == "%") {
    return int_divmod(op, x, y);
  } else {
    if (y < 0 && x == 0) eval_fail("0.0 cannot be raised to a negative power");
    if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
    return int_pow(x, y);
  }
  if (overflow) fail_overflow(describe_op(x, op, y));
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
  if (op == "~") {
    std::string out = a.str();
    append_checked(out, b.str(), "a concatenated string");
    return out;
  }
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
    return find_sub(container.as_string(), item.as_string()) != std::string::npos;
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
