// Python str behaviour on UTF-8 strings: len, strip, split, replace, case
// changes and the str methods chat templates call. Case changes of non-ASCII
// letters: lower() follows Unicode (ICU, per code point); upper(), title() and
// capitalize() change ASCII letters only.
#include <algorithm>
#include <cstring>

#include "qloom/text/jinja/budget.h"
#include "qloom/text/jinja/runtime.h"
#include "qloom/text/unicode.h"

namespace qloom::text::jinja {

void eval_fail(const std::string& message) { throw EvalError(ErrorKind::kInvalidInput, message); }

void fail_undefined(const Value& v) {
  throw EvalError(ErrorKind::kInvalidInput, v.name().empty() ? "value is undefined" : v.name(),
                  "give the template the variable it reads (messages, add_generation_prompt, extra keys)");
}

std::string object_desc(const Value& v) {
  if (v.is_none()) return "'None'";
  return "'" + v.type_name() + " object'";
}

namespace {

size_t cp_len_at(const std::string& s, size_t i) {
  return std::min(std::max<size_t>(utf8_len(static_cast<unsigned char>(s[i])), 1), s.size() - i);
}

}  // namespace

std::vector<std::string> codepoints(const std::string& s) {
  check_value_size(cp_count(s) * sizeof(std::string), "a string split into code points");
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = cp_len_at(s, i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::vector<size_t> cp_offsets(const std::string& s) {
  charge_work(s.size());
  std::vector<size_t> out;
  for (size_t i = 0; i < s.size(); i += cp_len_at(s, i)) out.push_back(i);
  out.push_back(s.size());
  return out;
}

size_t cp_count(const std::string& s) {
  charge_work(s.size());
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += cp_len_at(s, i)) ++n;
  return n;
}

size_t find_sub(const std::string& s, const std::string& sub, size_t from) {
  if (from > s.size()) return std::string::npos;
  const void* hit = memmem(s.data() + from, s.size() - from, sub.data(), sub.size());
  const size_t at = hit ? static_cast<size_t>(static_cast<const char*>(hit) - s.data()) : std::string::npos;
  charge_work((hit ? at + sub.size() : s.size()) - from);  // the bytes scanned
  return at;
}

size_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return cp_count(v.as_string());
    case Value::Kind::kList: return v.as_list().size();
    case Value::Kind::kDict: return v.as_dict().size();
    default: eval_fail("object of type '" + v.type_name() + "' has no len()");
  }
}

namespace {

// Python str.isspace(): Unicode White_Space plus the ASCII separators 0x1c-0x1f.
bool py_space(const std::string& cp) {
  size_t i = 0;
  char32_t c = next_codepoint(cp, i);
  return is_whitespace(c) || (c >= 0x1c && c <= 0x1f);
}

bool ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char up(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char down(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

std::string join_cps(const std::vector<std::string>& cps, size_t b, size_t e) {
  std::string out;
  for (size_t i = b; i < e; ++i) out += cps[i];
  return out;
}

}  // namespace

std::string py_strip(const std::string& s, const Value* chars, bool left, bool right) {
  std::vector<std::string> set;
  bool whitespace = !chars || chars->is_none() || chars->is_undefined();
  if (!whitespace) {
    if (!chars->is_string()) eval_fail("strip arg must be None or str");
    set = codepoints(chars->as_string());
  }
  auto strip_it = [&](const std::string& c) {
    return whitespace ? py_space(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  const std::vector<size_t> at = cp_offsets(s);
  auto cp = [&](size_t k) { return s.substr(at[k], at[k + 1] - at[k]); };
  size_t b = 0, e = at.size() - 1;
  while (left && b < e && strip_it(cp(b))) ++b;
  while (right && e > b && strip_it(cp(e - 1))) --e;
  return s.substr(at[b], at[e] - at[b]);
}

std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep && sep->is_string()) {
    const std::string& d = sep->as_string();
    if (d.empty()) eval_fail("empty separator");
    size_t start = 0;
    for (size_t hit; (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) &&
                     (hit = find_sub(s, d, start)) != std::string::npos;) {
      check_size((out.size() + 2) * sizeof(Value), "the result of split");
      out.push_back(s.substr(start, hit - start));
      start = hit + d.size();
    }
    out.push_back(s.substr(start));
    return out;
  }
  std::vector<std::string> cps = codepoints(s);
  size_t i = 0;
  for (;;) {
    while (i < cps.size() && py_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      size_t e = cps.size();
      while (e > i && py_space(cps[e - 1])) --e;
      out.push_back(join_cps(cps, i, e));
      break;
    }
    size_t b = i;
    while (i < cps.size() && !py_space(cps[i])) ++i;
    out.push_back(join_cps(cps, b, i));
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  const char* what = "the result of replace";
  std::string out;
  if (old.empty()) {  // Python inserts `with` around every code point
    const std::vector<size_t> at = cp_offsets(s);
    int64_t n = 0;
    for (size_t k = 0; k + 1 < at.size(); ++k) {
      if (count < 0 || n++ < count) append_checked(out, with, what);
      append_checked(out, s.substr(at[k], at[k + 1] - at[k]), what);
    }
    if (count < 0 || n < count) append_checked(out, with, what);
    return out;
  }
  size_t start = 0;
  int64_t n = 0;
  for (size_t hit; (count < 0 || n < count) && (hit = find_sub(s, old, start)) != std::string::npos; ++n) {
    append_checked(out, s.substr(start, hit - start) + with, what);
    start = hit + old.size();
  }
  append_checked(out, s.substr(start), what);
  return out;
}

std::string py_upper(const std::string& s) {
  std::string out = s;
  std::transform(out.begin(), out.end(), out.begin(), up);
  return out;
}

std::string py_lower(const std::string& s) { return unicode_lowercase(s); }

std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char c : s) {
    out += ascii_alpha(c) ? (prev_cased ? down(c) : up(c)) : c;
    prev_cased = ascii_alpha(c);
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  std::string out = py_lower(s);
  if (!out.empty()) out[0] = up(out[0]);
  return out;
}

namespace {

int64_t int_arg(const CallArgs& a, size_t i, const std::string& name, int64_t fallback) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) eval_fail("'" + v->type_name() + "' object cannot be interpreted as an integer");
  return v->as_int();
}

const std::string& str_arg(const CallArgs& a, size_t i, const std::string& what) {
  const Value* v = a.get(i, "");
  if (!v) eval_fail(what + "() takes at least " + std::to_string(i + 1) + " argument(s)");
  if (v->is_undefined()) fail_undefined(*v);
  if (!v->is_string()) eval_fail(what + "() argument must be str, not " + v->type_name());
  return v->as_string();
}

Value strings(const std::vector<std::string>& parts) {
  List l;
  for (const auto& p : parts) l.emplace_back(p);
  return Value::list(std::move(l));
}

// startswith / endswith: a str or a tuple of them.
bool affix(const std::string& s, const Value& arg, bool prefix) {
  if (arg.is_undefined()) fail_undefined(arg);
  List options = arg.is_list() ? arg.as_list() : List{arg};
  for (const auto& o : options) {
    if (!o.is_string()) eval_fail("startswith/endswith first arg must be str or a tuple of str");
    const std::string& a = o.as_string();
    if (a.size() <= s.size() && s.compare(prefix ? 0 : s.size() - a.size(), a.size(), a) == 0) return true;
  }
  return false;
}

Value call_string_method(const std::string& s, const std::string& name, const CallArgs& a) {
  charge_work(s.size());
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return py_strip(s, a.get(0, "chars"), name != "rstrip", name != "lstrip");
  if (name == "split") return strings(py_split(s, a.get(0, "sep"), int_arg(a, 1, "maxsplit", -1)));
  if (name == "upper") return py_upper(s);
  if (name == "lower") return py_lower(s);
  if (name == "title") return py_title(s);
  if (name == "capitalize") return py_capitalize(s);
  if (name == "replace") return py_replace(s, str_arg(a, 0, name), str_arg(a, 1, name), int_arg(a, 2, "count", -1));
  if (name == "startswith" || name == "endswith") {
    const Value* arg = a.get(0, "");
    if (!arg) eval_fail(name + "() takes at least 1 argument");
    return affix(s, *arg, name == "startswith");
  }
  if (name == "find") {
    size_t hit = find_sub(s, str_arg(a, 0, name));
    return hit == std::string::npos ? Value(-1) : Value(static_cast<int64_t>(cp_count(s.substr(0, hit))));
  }
  if (name == "count") {
    const std::string& sub = str_arg(a, 0, name);
    if (sub.empty()) return Value(static_cast<int64_t>(cp_count(s) + 1));
    int64_t n = 0;
    for (size_t p = find_sub(s, sub); p != std::string::npos; p = find_sub(s, sub, p + sub.size())) ++n;
    return Value(n);
  }
  // join
  const Value* items = a.get(0, "iterable");
  if (!items) eval_fail("join() takes exactly one argument");
  std::string out;
  bool first = true;
  for (const auto& v : iterate(*items)) {
    if (!v.is_string()) eval_fail("sequence item: expected str instance, " + v.type_name() + " found");
    append_checked(out, (first ? "" : s) + v.as_string(), "the result of join");
    first = false;
  }
  return out;
}

}  // namespace

Value string_method(const std::string& s, const std::string& name) {
  static const char* kMethods[] = {"strip", "lstrip", "rstrip", "split", "upper", "lower", "title", "capitalize",
                                   "replace", "startswith", "endswith", "find", "count", "join"};
  for (const char* m : kMethods) {
    if (name == m)
      return Value::callable("str." + name, [s, name](const CallArgs& a) { return call_string_method(s, name, a); });
  }
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

}  // namespace qloom::text::jinja
