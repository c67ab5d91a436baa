// The builtin filters chat templates use, with jinja2 3.1's arguments and
// results (tojson is transformers' override: json.dumps, ensure_ascii=False).
#include <algorithm>
#include <map>

#include "qloom/text/jinja/budget.h"
#include "qloom/text/jinja/runtime.h"

namespace qloom::text::jinja {
namespace {

using FilterFn = Value (*)(const Value&, const CallArgs&);

bool flag(const CallArgs& a, size_t i, const std::string& name, bool fallback = false) {
  const Value* v = a.get(i, name);
  return v ? v->truthy() : fallback;
}

const Value* arg(const CallArgs& a, size_t i, const std::string& name) {
  const Value* v = a.get(i, name);
  return v && !v->is_undefined() ? v : nullptr;
}

// The text a string filter works on, its work charged.
std::string text_of(const Value& v) {
  std::string s = v.str();
  charge_work(s.size());
  return s;
}

// A width or indent argument: a count of spaces, within max_value_bytes.
std::string spaces(const Value& n, const char* what) {
  if (!n.is_int() && !n.is_bool()) eval_fail(std::string(what) + " must be an integer or a string");
  const int64_t w = std::max<int64_t>(0, n.as_int());
  check_value_size(static_cast<uint64_t>(w), what);
  return std::string(static_cast<size_t>(w), ' ');
}

// "a.b.0": environment.getitem per part, as jinja2's attribute= arguments do.
Value attr_path(const Value& item, const std::string& path) {
  Value cur = item;
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.size() < 19 &&
                  std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (cur.is_undefined()) return cur;
    cur = get_item(cur, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value f_trim(const Value& v, const CallArgs& a) { return py_strip(text_of(v), a.get(0, "chars"), true, true); }
Value f_length(const Value& v, const CallArgs&) { return Value(static_cast<int64_t>(py_len(v))); }
Value f_upper(const Value& v, const CallArgs&) { return py_upper(text_of(v)); }
Value f_lower(const Value& v, const CallArgs&) { return py_lower(text_of(v)); }
Value f_capitalize(const Value& v, const CallArgs&) { return py_capitalize(text_of(v)); }
Value f_string(const Value& v, const CallArgs&) { return text_of(v); }
Value f_safe(const Value& v, const CallArgs&) { return v; }
Value f_list(const Value& v, const CallArgs&) { return Value::list(iterate(v)); }

// jinja2's title: each word (split at whitespace and -({[<) gets an upper-case
// first letter and lower-case rest.
Value f_title(const Value& v, const CallArgs&) {
  std::string s = text_of(v), out;
  bool word_start = true;
  for (char c : s) {
    bool sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '-' || c == '(' ||
               c == '{' || c == '[' || c == '<';
    if (sep) out += c;
    else out += word_start ? py_upper(std::string(1, c)) : py_lower(std::string(1, c));
    word_start = sep;
  }
  return out;
}

Value f_tojson(const Value& v, const CallArgs& a) {
  DumpOptions o;
  if (const Value* ind = arg(a, 0, "indent"); ind && !ind->is_none()) {
    o.indent_set = true;
    o.indent = ind->is_string() ? ind->as_string() : spaces(*ind, "the indent of tojson");
    o.item_sep = ",";
  }
  o.ensure_ascii = flag(a, 99, "ensure_ascii");
  o.sort_keys = flag(a, 99, "sort_keys");
  if (const Value* sep = arg(a, 99, "separators"); sep && sep->is_list() && sep->as_list().size() == 2) {
    o.item_sep = sep->as_list()[0].str();
    o.key_sep = sep->as_list()[1].str();
  }
  return dumps(v, o);
}

Value f_replace(const Value& v, const CallArgs& a) {
  const Value* old = arg(a, 0, "old");
  const Value* with = arg(a, 1, "new");
  if (!old || !with) eval_fail("replace filter needs the old and new strings");
  const Value* count = arg(a, 2, "count");
  return py_replace(text_of(v), old->str(), with->str(), count && !count->is_none() ? count->as_int() : -1);
}

Value f_join(const Value& v, const CallArgs& a) {
  const Value* sep = arg(a, 0, "d");
  const Value* attribute = arg(a, 1, "attribute");
  std::string out, d = sep ? sep->str() : "";
  bool first = true;
  for (const auto& item : iterate(v)) {
    append_checked(out, (first ? "" : d) + (attribute ? attr_path(item, attribute->str()) : item).str(),
                   "the result of join");
    first = false;
  }
  return out;
}

Value f_default(const Value& v, const CallArgs& a) {
  const Value* fallback = a.get(0, "default_value");
  bool boolean = flag(a, 1, "boolean");
  if (v.is_undefined() || (boolean && !v.truthy())) return fallback ? *fallback : Value("");
  return v;
}

Value f_first(const Value& v, const CallArgs&) {
  List items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(const Value& v, const CallArgs&) {
  List items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

// Python's int(float): truncation; NaN, inf and |x| >= 2^63 do not fit.
int64_t float_to_int(double d) {
  if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) fail_overflow("int(" + format_float(d) + ")");
  return static_cast<int64_t>(d);
}

Value f_int(const Value& v, const CallArgs& a) {
  const Value* fallback = a.get(0, "default");
  Value def = fallback ? *fallback : Value(0);
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) return v.as_double() != v.as_double() ? def : Value(float_to_int(v.as_double()));
  if (!v.is_string()) return def;
  std::string s = py_strip(v.as_string(), nullptr, true, true);
  size_t used = 0;
  try {  // out of range: the float parse below, then float_to_int's overflow
    int64_t i = std::stoll(s, &used, 10);
    if (used == s.size()) return Value(i);
  } catch (const std::exception&) {
  }
  double d = 0;
  try {
    d = std::stod(s, &used);
  } catch (const std::exception&) {
    return def;
  }
  return used == s.size() && d == d ? Value(float_to_int(d)) : def;
}

Value f_float(const Value& v, const CallArgs& a) {
  const Value* fallback = a.get(0, "default");
  Value def = fallback ? *fallback : Value(0.0);
  if (v.is_number() || v.is_bool()) return Value(v.as_double());
  if (!v.is_string()) return def;
  std::string s = py_strip(v.as_string(), nullptr, true, true);
  try {
    size_t used = 0;
    double d = std::stod(s, &used);
    if (used == s.size()) return Value(d);
  } catch (const std::exception&) {
  }
  return def;
}

Value f_items(const Value& v, const CallArgs&) {
  if (v.is_undefined()) return Value::list();
  if (!v.is_dict() || v.is_namespace())  // a namespace has no items() (jinja2: not a Mapping)
    eval_fail("items filter: can only get item pairs from a mapping, not " + v.type_name());
  return get_attr(v, "items").as_function()(CallArgs{});
}

// select / reject / selectattr / rejectattr.
Value select_impl(const Value& v, const CallArgs& a, bool by_attr, bool keep) {
  size_t first = 0;
  std::string attribute;
  if (by_attr) {
    const Value* at = arg(a, 0, "attribute");
    if (!at) eval_fail("selectattr/rejectattr need an attribute name");
    attribute = at->str();
    first = 1;
  }
  std::string test;
  CallArgs test_args;
  if (first < a.args.size()) {
    test = a.args[first].str();
    test_args.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(first) + 1, a.args.end());
    if (!is_test(test)) eval_fail("No test named '" + test + "'.");
  }
  List out;
  for (const auto& item : iterate(v)) {
    Value x = by_attr ? attr_path(item, attribute) : item;
    bool hit = test.empty() ? x.truthy() : call_test(test, x, test_args);
    if (hit == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(const Value& v, const CallArgs& a) { return select_impl(v, a, false, true); }
Value f_reject(const Value& v, const CallArgs& a) { return select_impl(v, a, false, false); }
Value f_selectattr(const Value& v, const CallArgs& a) { return select_impl(v, a, true, true); }
Value f_rejectattr(const Value& v, const CallArgs& a) { return select_impl(v, a, true, false); }

Value f_map(const Value& v, const CallArgs& a) {
  List out;
  if (const Value* at = arg(a, 99, "attribute")) {
    const Value* fallback = arg(a, 99, "default");
    for (const auto& item : iterate(v)) {
      Value x = attr_path(item, at->str());
      out.push_back(x.is_undefined() && fallback ? *fallback : x);
    }
    return Value::list(std::move(out));
  }
  if (a.args.empty()) eval_fail("map filter needs a filter name or attribute=");
  std::string filter = a.args[0].str();
  if (!is_filter(filter)) eval_fail("No filter named '" + filter + "'.");
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  for (const auto& item : iterate(v)) out.push_back(call_filter(filter, item, rest));
  return Value::list(std::move(out));
}

Value f_indent(const Value& v, const CallArgs& a) {
  const Value* w = arg(a, 0, "width");
  std::string pad = !w ? "    " : w->is_string() ? w->as_string() : spaces(*w, "the width of indent");
  bool first = flag(a, 1, "first"), blank = flag(a, 2, "blank");
  std::string s = text_of(v) + "\n";
  std::vector<std::string> lines;
  for (size_t start = 0, nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(s.substr(start, nl - start));
  std::string out = lines.empty() ? "" : lines[0];
  for (size_t i = 1; i < lines.size(); ++i)
    append_checked(out, "\n" + ((blank || !lines[i].empty()) ? pad : "") + lines[i], "the result of indent");
  return first ? pad + out : out;
}

Value f_wordcount(const Value& v, const CallArgs&) {
  std::string s = text_of(v);
  int64_t n = 0;
  bool in_word = false;
  for (unsigned char c : s) {
    bool w = c >= 0x80 || std::isalnum(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value f_reverse(const Value& v, const CallArgs&) {
  if (v.is_string()) {
    std::vector<std::string> cps = codepoints(v.as_string());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return out;
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

// The key sort and unique compare by: the attribute, lower-cased strings
// unless case_sensitive.
Value sort_key(const Value& item, const Value* attribute, bool case_sensitive) {
  Value k = attribute ? attr_path(item, attribute->str()) : item;
  return (!case_sensitive && k.is_string()) ? Value(py_lower(k.as_string())) : k;
}

Value f_sort(const Value& v, const CallArgs& a) {
  bool reverse = flag(a, 0, "reverse"), cs = flag(a, 1, "case_sensitive");
  const Value* attribute = arg(a, 2, "attribute");
  List items = iterate(v);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    Value kx = sort_key(x, attribute, cs), ky = sort_key(y, attribute, cs);
    return reverse ? py_less(ky, kx) : py_less(kx, ky);
  });
  return Value::list(std::move(items));
}

Value f_unique(const Value& v, const CallArgs& a) {
  bool cs = flag(a, 0, "case_sensitive");
  const Value* attribute = arg(a, 1, "attribute");
  List out, seen;
  for (const auto& item : iterate(v)) {
    Value k = sort_key(item, attribute, cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(k); })) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

Value f_abs(const Value& v, const CallArgs&) {
  if (v.is_float()) return Value(v.as_double() < 0 ? -v.as_double() : v.as_double());
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) fail_overflow("abs(" + std::to_string(v.as_int()) + ")");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  eval_fail("bad operand type for abs(): '" + v.type_name() + "'");
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> kFilters = {
      {"trim", f_trim},       {"length", f_length},     {"count", f_length},         {"tojson", f_tojson},
      {"upper", f_upper},     {"lower", f_lower},       {"title", f_title},          {"capitalize", f_capitalize},
      {"replace", f_replace}, {"join", f_join},         {"default", f_default},      {"d", f_default},
      {"first", f_first},     {"last", f_last},         {"list", f_list},            {"string", f_string},
      {"int", f_int},         {"float", f_float},       {"items", f_items},          {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr}, {"select", f_select}, {"reject", f_reject},      {"map", f_map},
      {"safe", f_safe},       {"indent", f_indent},     {"wordcount", f_wordcount},  {"reverse", f_reverse},
      {"sort", f_sort},       {"unique", f_unique},     {"abs", f_abs},
  };
  return kFilters;
}

}  // namespace

bool is_filter(const std::string& name) { return filters().count(name) != 0; }

Value call_filter(const std::string& name, const Value& input, const CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) eval_fail("No filter named '" + name + "'.");
  return it->second(input, args);
}

}  // namespace qloom::text::jinja
