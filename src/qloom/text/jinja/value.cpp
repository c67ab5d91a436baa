#include "qloom/text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "qloom/core/error.h"
#include "qloom/text/jinja/budget.h"
#include "qloom/text/jinja/runtime.h"

namespace qloom::text::jinja {

// ---- Dict ----

const Value* Dict::find(const std::string& key) const {
  charge_work(items_.size());
  for (const auto& [k, v] : items_)
    if (k == key) return &v;
  return nullptr;
}

Value* Dict::find(const std::string& key) {
  charge_work(items_.size());
  for (auto& [k, v] : items_)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
    return;
  }
  items_.emplace_back(key, std::move(value));
}

void Dict::append_new(const std::string& key, Value value) { items_.emplace_back(key, std::move(value)); }

void Dict::clear() { items_.clear(); }

size_t Dict::size() const { return items_.size(); }

bool Dict::erase(const std::string& key) {
  for (auto it = items_.begin(); it != items_.end(); ++it) {
    if (it->first == key) {
      items_.erase(it);
      return true;
    }
  }
  return false;
}

const Value* CallArgs::get(size_t i, const std::string& name) const {
  if (i < args.size()) return &args[i];
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// ---- construction ----

const std::string& Value::empty_string() {
  static const std::string kEmpty;
  return kEmpty;
}

void check_value_depth(int depth) {
  const int limit = current_limits().max_value_depth;
  if (depth > limit)
    throw EvalError(ErrorKind::kInvalidInput,
                    "value nested more than " + std::to_string(limit) + " deep (a namespace that contains itself?)",
                    "a chat template has no need for such values; fix the template");
}

namespace {

// The height of a new list or dict made of `kids`; inside a render, past
// max_value_depth is an error (deeper values would be freed by deep recursion).
template <class Range, class Get>
int height_of(const Range& kids, Get get) {
  int h = 0;
  for (const auto& k : kids) h = std::max(h, get(k).height());
  if (current_budget()) check_value_depth(h + 1);
  return h + 1;
}

}  // namespace

Value Value::undefined(std::string name) {
  Value v;
  if (!name.empty()) v.s_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), b_(b), i_(b ? 1 : 0), d_(b ? 1 : 0) {}
Value::Value(int64_t i) : kind_(Kind::kInt), b_(i != 0), i_(i), d_(static_cast<double>(i)) {}
Value::Value(double d) : kind_(Kind::kFloat), b_(d != 0), d_(d) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::make_shared<const std::string>(std::move(s))) {}

Value Value::list(List items, bool tuple) {
  Value v;
  v.kind_ = Kind::kList;
  v.tuple_ = tuple;
  v.height_ = height_of(items, [](const Value& x) -> const Value& { return x; });
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::dict(Dict d, bool namespace_object) {
  Value v;
  v.kind_ = Kind::kDict;
  v.namespace_ = namespace_object;
  if (!namespace_object) v.height_ = height_of(d.items(), [](const auto& kv) -> const Value& { return kv.second; });
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::callable(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  v.fn_ = std::make_shared<Function>(std::move(fn));
  return v;
}

namespace {

// Values given to a template are bounded like the ones it makes.
constexpr int kMaxJsonDepth = 128;

template <class Json>
Value value_from_json(const Json& j, int depth) {
  if (depth > kMaxJsonDepth && (j.is_array() || j.is_object()))
    throw Error(ErrorKind::kInvalidInput, "", "", "template variables nested more than " +
                std::to_string(kMaxJsonDepth) + " deep", "pass messages and template arguments of sane depth");
  switch (j.type()) {
    case nlohmann::detail::value_t::null: return Value::none();
    case nlohmann::detail::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::detail::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::detail::value_t::number_unsigned: return Value(static_cast<int64_t>(j.template get<uint64_t>()));
    case nlohmann::detail::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::detail::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::detail::value_t::array: {
      List items;
      for (const auto& e : j) items.push_back(value_from_json(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::detail::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.append_new(k, value_from_json(e, depth + 1));
      return Value::dict(std::move(d));
    }
    default: return Value::undefined();
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& j) { return value_from_json(j, 1); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j, 1); }

// ---- conversions ----

double Value::as_double() const { return kind_ == Kind::kFloat ? d_ : static_cast<double>(i_); }

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat: return b_;
    case Kind::kString: return !as_string().empty();
    case Kind::kList: return !list_->empty();
    case Kind::kDict: return dict_->size() != 0;
    case Kind::kCallable: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return tuple_ ? "tuple" : "list";
    case Kind::kDict: return namespace_ ? "Namespace" : "dict";
    case Kind::kCallable: return "function";
  }
  return "object";
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  int exp = std::stoi(sci.substr(e + 1));
  std::string mant = sci.substr(0, e);
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + eb;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  size_t int_len = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_len) return out + digits + std::string(int_len - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == quote || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kString: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  std::string out;
  std::vector<const void*> active;
  repr_into(out, active);
  return out;
}

namespace {

// Python's Py_ReprEnter / Py_ReprLeave: false when `p` is being printed already.
struct ReprGuard {
  std::vector<const void*>& active;
  bool entered;
  ReprGuard(std::vector<const void*>& a, const void* p)
      : active(a), entered(std::find(a.begin(), a.end(), p) == a.end()) {
    if (!entered) return;
    check_value_depth(static_cast<int>(active.size()) + 1);
    active.push_back(p);
  }
  ~ReprGuard() {
    if (entered) active.pop_back();
  }
};

}  // namespace

void Value::repr_into(std::string& out, std::vector<const void*>& active) const {
  switch (kind_) {
    case Kind::kUndefined: return;
    case Kind::kNone: out += "None"; return;
    case Kind::kBool: out += b_ ? "True" : "False"; return;
    case Kind::kInt: out += std::to_string(i_); return;
    case Kind::kFloat: out += format_float(d_); return;
    case Kind::kString: append_checked(out, repr_string(as_string()), "the repr of a value"); return;
    case Kind::kList: {
      const ReprGuard guard(active, list_.get());
      if (!guard.entered) {
        out += tuple_ ? "(...)" : "[...]";
        return;
      }
      out += tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        (*list_)[i].repr_into(out, active);
      }
      if (tuple_ && list_->size() == 1) out += ",";
      out += tuple_ ? ")" : "]";
      return;
    }
    case Kind::kDict: {
      const ReprGuard guard(active, dict_.get());
      if (!guard.entered) {
        out += namespace_ ? "<Namespace {...}>" : "{...}";
        return;
      }
      out += namespace_ ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items()) {
        append_checked(out, (first ? "" : ", ") + repr_string(k) + ": ", "the repr of a value");
        v.repr_into(out, active);
        first = false;
      }
      out += namespace_ ? "}>" : "}";
      return;
    }
    case Kind::kCallable: out += "<function " + as_string() + ">"; return;
  }
}

bool Value::equals(const Value& o) const { return equals_at(o, 0); }

bool Value::equals_at(const Value& o, int depth) const {
  charge_work(0);
  bool num_a = is_number() || is_bool(), num_b = o.is_number() || o.is_bool();
  if (num_a && num_b) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) return as_double() == o.as_double();
    return i_ == o.i_;
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: charge_work(as_string().size()); return as_string() == o.as_string();
    case Kind::kList: {
      if (list_->size() != o.list_->size()) return false;
      check_value_depth(depth + 1);
      for (size_t i = 0; i < list_->size(); ++i)
        if (!(*list_)[i].equals_at((*o.list_)[i], depth + 1)) return false;
      return true;
    }
    case Kind::kDict: {
      if (namespace_ || o.namespace_) return dict_ == o.dict_;
      if (dict_->size() != o.dict_->size()) return false;
      check_value_depth(depth + 1);
      for (const auto& [k, v] : dict_->items()) {
        const Value* w = o.dict_->find(k);
        if (!w || !v.equals_at(*w, depth + 1)) return false;
      }
      return true;
    }
    case Kind::kCallable: return fn_ == o.fn_;
    default: return false;
  }
}

}  // namespace qloom::text::jinja
