// qloom::text::jinja::Value — the dynamic value a chat template computes with:
// the Python objects jinja2 hands a template (None, bool, int, float, str, list,
// tuple, dict, callables) plus jinja2's default Undefined. Lists and dicts are
// shared (Python reference semantics: a namespace() changed inside a loop is the
// one the caller holds); dicts keep insertion order, as Python's do. Strings
// are immutable and shared too, so copying a Value never copies text.
// Only a namespace changes after it is made, so only a namespace can contain
// itself: a list or dict records its nesting depth when made (a namespace in it
// counts as depth 0), namespaces compare by identity (as Python's do), repr
// prints a container it is already inside as [...] / {...}, and every walk over
// a value (repr, ==, <, tojson) stops at RenderLimits::max_value_depth.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::text::jinja {

class Value;
using List = std::vector<Value>;

// Insertion-ordered string-keyed map (JSON objects, dict(), namespace()).
class Dict {
 public:
  const Value* find(const std::string& key) const;
  Value* find(const std::string& key);
  void set(const std::string& key, Value value);  // linear in size()
  // `key` is known not to be present (a JSON object's keys): constant time.
  void append_new(const std::string& key, Value value);
  bool erase(const std::string& key);
  void clear();
  size_t size() const;
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, Value>> items_;
};

// Arguments of a call: positional, then keyword in the order written.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // Positional i, else keyword `name`, else nullptr.
  const Value* get(size_t i, const std::string& name) const;
};
using Function = std::function<Value(const CallArgs&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // undefined
  static Value undefined(std::string name = {});
  static Value none();
  Value(bool b);  // NOLINT(google-explicit-constructor)
  Value(int64_t i);  // NOLINT
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d);  // NOLINT
  Value(std::string s);  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}  // NOLINT
  static Value list(List items = {}, bool tuple = false);
  static Value dict(Dict d = {}, bool namespace_object = false);
  static Value callable(std::string name, Function fn);
  // JSON values; ordered_json keeps the objects' key order (nlohmann::json sorts keys).
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kDict && namespace_; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }   // ints and bools
  double as_double() const;               // ints, bools and floats
  const std::string& as_string() const { return s_ ? *s_ : empty_string(); }
  const List& as_list() const { return *list_; }
  List& as_list() { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& as_dict() { return *dict_; }
  const Function& as_function() const { return *fn_; }
  // The name an undefined came from, or a callable's name.
  const std::string& name() const { return as_string(); }
  // Lists / dicts nested in this one, plus one (0 for anything else).
  int height() const { return height_; }

  bool truthy() const;           // Python bool()
  std::string str() const;       // Python str(); undefined -> ""
  std::string repr() const;      // Python repr()
  std::string type_name() const; // Python type name: 'str', 'dict', 'NoneType'...
  bool equals(const Value& other) const;  // Python ==
  // The walks behind repr() and equals(). `active`: the lists and dicts being
  // printed (a container met again prints as [...] / {...}, as Python's
  // reprlib guard does); `depth` levels down.
  void repr_into(std::string& out, std::vector<const void*>& active) const;
  bool equals_at(const Value& other, int depth) const;

 private:
  static const std::string& empty_string();
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  bool namespace_ = false;
  int height_ = 0;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// A walk over a value `depth` levels down: past RenderLimits::max_value_depth
// an error (a namespace that contains itself, or absurd nesting).
void check_value_depth(int depth);

// Python's repr() of a float: shortest round-trip digits, "1.0", "1e+16", "inf".
std::string format_float(double d);
// Python's repr() of a str: single quotes unless it holds ' and no ".
std::string repr_string(const std::string& s);

}  // namespace qloom::text::jinja
