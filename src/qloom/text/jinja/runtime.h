// Internal to the Jinja engine: what the renderer and the builtins share —
// evaluation errors (located by the renderer), Python's str/dict/list behaviour
// on attribute and item access, the builtin filters and tests, json.dumps.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/text/jinja/value.h"

namespace qloom::text::jinja {

// Thrown by builtins while a template runs; the renderer turns it into a
// qloom::Error naming the template and the line:column of the expression.
struct EvalError : std::runtime_error {
  EvalError(ErrorKind k, const std::string& message, std::string hint = {})
      : std::runtime_error(message), kind(k), remedy(std::move(hint)) {}
  ErrorKind kind;
  std::string remedy;
};
[[noreturn]] void eval_fail(const std::string& message);
// Using an undefined value where jinja2's Undefined raises (arithmetic, calls,
// attribute access, JSON): UndefinedError with the undefined's own message.
[[noreturn]] void fail_undefined(const Value& v);
// "'dict object'", "'None'": how jinja2 names an object in its messages.
std::string object_desc(const Value& v);

// ---- Python str semantics on UTF-8 ----
// The code points of `s`, one string each (32+ bytes a code point: checked
// against max_value_bytes); cp_offsets: where each starts, then s.size().
std::vector<std::string> codepoints(const std::string& s);
std::vector<size_t> cp_offsets(const std::string& s);
size_t cp_count(const std::string& s);
// s.find(sub, from) in linear time (two-way search, not the naive one).
size_t find_sub(const std::string& s, const std::string& sub, size_t from = 0);
size_t py_len(const Value& v);  // str (code points), list, dict; undefined -> 0
std::string py_strip(const std::string& s, const Value* chars, bool left, bool right);
std::vector<std::string> py_split(const std::string& s, const Value* sep, int64_t maxsplit);
std::string py_replace(const std::string& s, const std::string& old, const std::string& with, int64_t count);
std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_title(const std::string& s);
std::string py_capitalize(const std::string& s);
// str.<name> as a bound method, or undefined when str has no such method.
Value string_method(const std::string& s, const std::string& name);

// ---- access ----
Value get_attr(const Value& obj, const std::string& name);  // obj.name
Value get_item(const Value& obj, const Value& key);          // obj[key]
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python iter(): list items, dict keys, str code points; undefined -> nothing.
List iterate(const Value& v);
// Python <, for sort and comparisons: numbers, strings, lists.
bool py_less(const Value& a, const Value& b);

// ---- json.dumps(ensure_ascii=False) as transformers' tojson filter ----
struct DumpOptions {
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool indent_set = false;
  std::string indent;               // indent=4 -> "    "
  std::string item_sep = ", ";      // ", " (or "," when indented)
  std::string key_sep = ": ";
};
std::string dumps(const Value& v, const DumpOptions& options);

// ---- builtin filters and tests ----
bool is_filter(const std::string& name);
bool is_test(const std::string& name);
Value call_filter(const std::string& name, const Value& input, const CallArgs& args);
bool call_test(const std::string& name, const Value& input, const CallArgs& args);

}  // namespace qloom::text::jinja
