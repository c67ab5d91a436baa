// Attribute, item and slice access as jinja2's sandbox does them: `x.name` tries
// Python attributes (str and dict methods) and then the item; `x[key]` tries the
// item and then the attribute. A miss gives an Undefined carrying jinja2's
// message ("'dict object' has no attribute 'content'"); using the undefined
// value further (attribute access, arithmetic, calls) raises that message.
#include <algorithm>

#include "qloom/text/jinja/budget.h"
#include "qloom/text/jinja/runtime.h"

namespace qloom::text::jinja {
namespace {

Value missing_attr(const Value& obj, const std::string& name) {
  return Value::undefined(object_desc(obj) + " has no attribute '" + name + "'");
}

Value items_of(const Dict& d) {
  check_value_size(d.size() * 3 * sizeof(Value), "the items of a dict");
  List out;
  for (const auto& [k, v] : d.items()) out.push_back(Value::list({Value(k), v}, true));
  return Value::list(std::move(out));
}

Value dict_method(const Value& obj, const std::string& name) {
  if (name == "items") return Value::callable("dict.items", [obj](const CallArgs&) { return items_of(obj.as_dict()); });
  if (name == "keys" || name == "values") {
    bool keys = name == "keys";
    return Value::callable("dict." + name, [obj, keys](const CallArgs&) {
      check_value_size(obj.as_dict().size() * sizeof(Value), "the keys or values of a dict");
      List out;
      for (const auto& [k, v] : obj.as_dict().items()) out.push_back(keys ? Value(k) : v);
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::callable("dict.get", [obj](const CallArgs& a) {
      const Value* key = a.get(0, "key");
      if (!key) eval_fail("get expected at least 1 argument, got 0");
      const Value* fallback = a.get(1, "default");
      const Value* hit = key->is_string() ? obj.as_dict().find(key->as_string()) : nullptr;
      return hit ? *hit : (fallback ? *fallback : Value::none());
    });
  }
  return Value::undefined();
}

bool is_dict_method(const std::string& name) {
  return name == "items" || name == "keys" || name == "values" || name == "get";
}

// Python index normalisation; false when out of range.
bool normalise_index(int64_t& i, size_t size) {
  if (i < 0) i += static_cast<int64_t>(size);
  return i >= 0 && i < static_cast<int64_t>(size);
}

int64_t slice_bound(const Value& v, int64_t fallback) {
  if (v.is_none() || v.is_undefined()) return fallback;
  if (!v.is_int() && !v.is_bool()) eval_fail("slice indices must be integers or None");
  return v.as_int();
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined: fail_undefined(obj);
    case Value::Kind::kString: {
      Value m = string_method(obj.as_string(), name);
      return m.is_undefined() ? missing_attr(obj, name) : m;
    }
    case Value::Kind::kDict: {
      if (!obj.is_namespace() && is_dict_method(name)) return dict_method(obj, name);
      const Value* hit = obj.as_dict().find(name);
      return hit ? *hit : missing_attr(obj, name);
    }
    default: return missing_attr(obj, name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (key.is_undefined()) fail_undefined(key);
  bool int_key = key.is_int() || key.is_bool();
  if (obj.is_list() && int_key) {
    int64_t i = key.as_int();
    if (normalise_index(i, obj.as_list().size())) return obj.as_list()[static_cast<size_t>(i)];
    return Value::undefined(object_desc(obj) + " has no element " + key.repr());
  }
  if (obj.is_string() && int_key) {
    const std::string& s = obj.as_string();
    const std::vector<size_t> at = cp_offsets(s);
    int64_t i = key.as_int();
    if (normalise_index(i, at.size() - 1)) {
      const auto k = static_cast<size_t>(i);
      return Value(s.substr(at[k], at[k + 1] - at[k]));
    }
    return Value::undefined(object_desc(obj) + " has no element " + key.repr());
  }
  if (obj.is_dict() && key.is_string()) {
    if (const Value* hit = obj.as_dict().find(key.as_string())) return *hit;
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined(object_desc(obj) + " has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (!obj.is_list() && !obj.is_string()) eval_fail(object_desc(obj) + " is not subscriptable");
  int64_t step = slice_bound(step_v, 1);
  if (step == 0) eval_fail("slice step cannot be zero");
  std::vector<size_t> at;
  if (obj.is_string()) at = cp_offsets(obj.as_string());
  const auto n = static_cast<int64_t>(obj.is_string() ? at.size() - 1 : obj.as_list().size());
  auto clamp = [&](int64_t v) {
    if (v < 0) v += n;
    if (step > 0) return std::clamp<int64_t>(v, 0, n);
    return std::clamp<int64_t>(v, -1, n - 1);
  };
  int64_t b = start.is_none() || start.is_undefined() ? (step > 0 ? 0 : n - 1) : clamp(slice_bound(start, 0));
  int64_t e = stop.is_none() || stop.is_undefined() ? (step > 0 ? n : -1) : clamp(slice_bound(stop, 0));
  List items;
  std::string text;
  charge_work(static_cast<size_t>(n));
  // b and e lie in [-1, n], so i + step cannot overflow before it passes e.
  for (int64_t i = b; step > 0 ? i < e : i > e;) {
    const auto k = static_cast<size_t>(i);
    if (obj.is_string()) text.append(obj.as_string(), at[k], at[k + 1] - at[k]);
    else items.push_back(obj.as_list()[k]);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  if (obj.is_string()) return Value(text);
  return Value::list(std::move(items), obj.is_tuple());
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: charge_work(v.as_list().size()); return v.as_list();
    case Value::Kind::kDict: {
      if (v.is_namespace()) break;
      charge_work(v.as_dict().size());
      List keys;
      for (const auto& [k, x] : v.as_dict().items()) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<std::string> cps = codepoints(v.as_string());
      check_value_size(cps.size() * sizeof(Value), "a string's list of characters");
      List out;
      for (auto& c : cps) out.emplace_back(std::move(c));
      return out;
    }
    default: break;
  }
  eval_fail("'" + v.type_name() + "' object is not iterable");
}

namespace {

bool less_at(const Value& a, const Value& b, int depth) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  bool na = a.is_number() || a.is_bool(), nb = b.is_number() || b.is_bool();
  if (na && nb) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) {
    charge_work(std::min(a.as_string().size(), b.as_string().size()));
    return a.as_string() < b.as_string();
  }
  if (a.is_list() && b.is_list()) {
    check_value_depth(depth + 1);
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!x[i].equals_at(y[i], depth + 1)) return less_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  eval_fail("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace

bool py_less(const Value& a, const Value& b) { return less_at(a, b, 0); }

}  // namespace qloom::text::jinja
