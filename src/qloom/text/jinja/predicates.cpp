// The builtin tests (`x is defined`, `x is equalto y`...) with jinja2 3.1's
// meaning: `iterable` holds for undefined (jinja2's Undefined iterates as
// empty), `number` for bools, `integer` not for bools, `mapping` not for a
// namespace.
#include <map>

#include "qloom/text/jinja/runtime.h"

namespace qloom::text::jinja {
namespace {

using TestFn = bool (*)(const Value&, const CallArgs&);

const Value& other(const CallArgs& a, const std::string& test) {
  const Value* v = a.get(0, "other");
  if (!v) eval_fail("test '" + test + "' needs an argument");
  return *v;
}

bool t_defined(const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(const Value& v, const CallArgs&) { return v.is_none(); }
bool t_string(const Value& v, const CallArgs&) { return v.is_string(); }
bool t_number(const Value& v, const CallArgs&) { return v.is_number() || v.is_bool(); }
bool t_integer(const Value& v, const CallArgs&) { return v.is_int(); }
bool t_float(const Value& v, const CallArgs&) { return v.is_float(); }
bool t_boolean(const Value& v, const CallArgs&) { return v.is_bool(); }
bool t_true(const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_mapping(const Value& v, const CallArgs&) { return v.is_dict() && !v.is_namespace(); }
bool t_iterable(const Value& v, const CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
}
bool t_sequence(const Value& v, const CallArgs&) { return v.is_string() || v.is_list() || t_mapping(v, {}); }
bool t_callable(const Value& v, const CallArgs&) { return v.is_callable(); }
bool t_eq(const Value& v, const CallArgs& a) { return v.equals(other(a, "eq")); }
bool t_ne(const Value& v, const CallArgs& a) { return !v.equals(other(a, "ne")); }
bool t_lt(const Value& v, const CallArgs& a) { return py_less(v, other(a, "lt")); }
bool t_gt(const Value& v, const CallArgs& a) { return py_less(other(a, "gt"), v); }
bool t_le(const Value& v, const CallArgs& a) { return !py_less(other(a, "le"), v); }
bool t_ge(const Value& v, const CallArgs& a) { return !py_less(v, other(a, "ge")); }
bool t_sameas(const Value& v, const CallArgs& a) {
  const Value& o = other(a, "sameas");
  if (v.kind() != o.kind()) return false;
  return (v.is_none() || v.is_bool() || v.is_int() || v.is_string()) ? v.equals(o) : v.equals(o) && v.repr() == o.repr();
}
bool t_in(const Value& v, const CallArgs& a) {
  const Value& seq = other(a, "in");
  if (seq.is_string()) {
    if (!v.is_string()) eval_fail("'in <string>' requires string as left operand, not " + v.type_name());
    return find_sub(seq.as_string(), v.as_string()) != std::string::npos;
  }
  for (const auto& x : iterate(seq))
    if (x.equals(v)) return true;
  return false;
}

int64_t int_of(const Value& v, const char* test) {
  if (!v.is_int() && !v.is_bool()) eval_fail(std::string("test '") + test + "' needs an integer");
  return v.as_int();
}
bool t_odd(const Value& v, const CallArgs&) { return int_of(v, "odd") % 2 != 0; }
bool t_even(const Value& v, const CallArgs&) { return int_of(v, "even") % 2 == 0; }
bool t_divisibleby(const Value& v, const CallArgs& a) {
  int64_t d = int_of(other(a, "divisibleby"), "divisibleby");
  if (d == 0) eval_fail("integer division or modulo by zero");
  return d == -1 || int_of(v, "divisibleby") % d == 0;  // INT64_MIN % -1 traps
}
bool t_lower(const Value& v, const CallArgs&) { return v.is_string() && py_lower(v.as_string()) == v.as_string(); }
bool t_upper(const Value& v, const CallArgs&) { return v.is_string() && py_upper(v.as_string()) == v.as_string(); }

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> kTests = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},       {"string", t_string},
      {"number", t_number},     {"integer", t_integer},     {"float", t_float},     {"boolean", t_boolean},
      {"true", t_true},         {"false", t_false},         {"mapping", t_mapping}, {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable},   {"in", t_in},           {"equalto", t_eq},
      {"eq", t_eq},             {"==", t_eq},               {"ne", t_ne},           {"!=", t_ne},
      {"lt", t_lt},             {"<", t_lt},                {"lessthan", t_lt},     {"gt", t_gt},
      {">", t_gt},              {"greaterthan", t_gt},      {"le", t_le},           {"<=", t_le},
      {"ge", t_ge},             {">=", t_ge},               {"sameas", t_sameas},   {"odd", t_odd},
      {"even", t_even},         {"divisibleby", t_divisibleby}, {"lower", t_lower}, {"upper", t_upper},
  };
  return kTests;
}

}  // namespace

bool is_test(const std::string& name) { return tests().count(name) != 0; }

bool call_test(const std::string& name, const Value& input, const CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) eval_fail("No test named '" + name + "'.");
  return it->second(input, args);
}

}  // namespace qloom::text::jinja
