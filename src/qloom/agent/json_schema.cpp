#include "qloom/agent/json_schema.h"

#include <cmath>
#include <regex>
#include <unordered_map>

#include "qloom/core/error.h"

namespace qloom::agent {
namespace {

using json = nlohmann::json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "integer";
    case json::value_t::number_float: return "number";
    case json::value_t::string: return "string";
    case json::value_t::array: return "array";
    case json::value_t::object: return "object";
    default: return "unknown";
  }
}

bool is_type(const json& v, const std::string& t) {
  if (t == "number") return v.is_number();
  if (t == "integer") {
    if (v.is_number_integer()) return true;
    if (v.is_number_float()) {
      const double d = v.get<double>();
      return std::isfinite(d) && d == std::floor(d);
    }
    return false;
  }
  return type_of(v) == t;
}

// JSON equality with numbers compared by value (1 == 1.0), as the spec requires.
bool equal(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      const auto jt = b.find(it.key());
      if (jt == b.end() || !equal(*it, *jt)) return false;
    }
    return true;
  }
  return a == b;
}

std::string pointer_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  void run(const json& schema, const json& v, const std::string& path, std::vector<SchemaViolation>& out) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) out.push_back({path, "no value is allowed here (schema false)"});
      return;
    }
    if (!schema.is_object()) return;
    if (auto r = schema.find("$ref"); r != schema.end() && r->is_string()) {
      run(resolve(r->get<std::string>()), v, path, out);
      return;  // draft-07: siblings of $ref are ignored
    }
    auto add = [&](std::string msg) { out.push_back({path, std::move(msg)}); };

    if (auto t = schema.find("type"); t != schema.end()) {
      bool ok = false;
      if (t->is_string()) ok = is_type(v, t->get<std::string>());
      else if (t->is_array())
        for (const auto& x : *t) ok = ok || (x.is_string() && is_type(v, x.get<std::string>()));
      if (!ok) add("expected type " + t->dump() + ", got " + type_of(v));
    }
    if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
      bool ok = false;
      for (const auto& x : *e) ok = ok || equal(x, v);
      if (!ok) add("value " + v.dump() + " is not one of " + e->dump());
    }
    if (auto c = schema.find("const"); c != schema.end() && !equal(*c, v)) add("value must be " + c->dump());

    if (v.is_number()) numeric(schema, v.get<double>(), add);
    if (v.is_string()) string_checks(schema, v.get<std::string>(), add);
    if (v.is_array()) array_checks(schema, v, path, out, add);
    if (v.is_object()) object_checks(schema, v, path, out, add);

    if (auto a = schema.find("allOf"); a != schema.end() && a->is_array())
      for (const auto& s : *a) run(s, v, path, out);
    if (auto a = schema.find("anyOf"); a != schema.end() && a->is_array()) {
      bool any = false;
      for (const auto& s : *a) any = any || valid(s, v);
      if (!any) add("matches none of anyOf");
    }
    if (auto a = schema.find("oneOf"); a != schema.end() && a->is_array()) {
      int n = 0;
      for (const auto& s : *a) n += valid(s, v);
      if (n != 1) add("matches " + std::to_string(n) + " of oneOf (exactly 1 required)");
    }
    if (auto n = schema.find("not"); n != schema.end() && valid(*n, v)) add("matches the schema under 'not'");
    if (auto i = schema.find("if"); i != schema.end()) {
      if (valid(*i, v)) {
        if (auto t = schema.find("then"); t != schema.end()) run(*t, v, path, out);
      } else if (auto e = schema.find("else"); e != schema.end()) {
        run(*e, v, path, out);
      }
    }
  }

 private:
  bool valid(const json& schema, const json& v) {
    std::vector<SchemaViolation> tmp;
    run(schema, v, "", tmp);
    return tmp.empty();
  }

  const json& resolve(const std::string& ref) {
    if (ref.empty() || ref[0] != '#')
      throw Error(ErrorKind::kInvalidInput, "", "$ref", "only same-document references are supported: '" + ref + "'");
    std::string ptr = ref.substr(1);
    // Percent-decoding of the fragment (%25 -> %, %22 -> ").
    std::string dec;
    for (size_t i = 0; i < ptr.size(); ++i) {
      if (ptr[i] == '%' && i + 2 < ptr.size()) {
        dec += static_cast<char>(std::stoi(ptr.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        dec += ptr[i];
      }
    }
    try {
      return root_.at(json::json_pointer(dec));
    } catch (const std::exception&) {
      throw Error(ErrorKind::kInvalidInput, "", "$ref", "cannot resolve '" + ref + "' in the schema");
    }
  }

  template <class Add>
  void numeric(const json& s, double x, Add& add) {
    if (auto m = s.find("multipleOf"); m != s.end() && m->is_number()) {
      const double q = x / m->get<double>();
      if (!std::isfinite(q) || std::fabs(q - std::round(q)) > 1e-9 * std::max(1.0, std::fabs(q)))
        add("must be a multiple of " + m->dump());
    }
    if (auto m = s.find("maximum"); m != s.end() && m->is_number() && x > m->get<double>()) add("must be <= " + m->dump());
    if (auto m = s.find("exclusiveMaximum"); m != s.end() && m->is_number() && x >= m->get<double>())
      add("must be < " + m->dump());
    if (auto m = s.find("minimum"); m != s.end() && m->is_number() && x < m->get<double>()) add("must be >= " + m->dump());
    if (auto m = s.find("exclusiveMinimum"); m != s.end() && m->is_number() && x <= m->get<double>())
      add("must be > " + m->dump());
  }

  template <class Add>
  void string_checks(const json& s, const std::string& x, Add& add) {
    if (auto m = s.find("maxLength"); m != s.end() && m->is_number() && double(code_points(x)) > m->get<double>())
      add("longer than " + m->dump() + " characters");
    if (auto m = s.find("minLength"); m != s.end() && m->is_number() && double(code_points(x)) < m->get<double>())
      add("shorter than " + m->dump() + " characters");
    if (auto p = s.find("pattern"); p != s.end() && p->is_string() && !std::regex_search(x, regex(p->get<std::string>())))
      add("does not match the pattern " + p->dump());
  }

  template <class Add>
  void array_checks(const json& s, const json& v, const std::string& path, std::vector<SchemaViolation>& out, Add& add) {
    if (auto it = s.find("items"); it != s.end()) {
      if (it->is_array()) {
        for (size_t i = 0; i < v.size() && i < it->size(); ++i) run((*it)[i], v[i], path + "/" + std::to_string(i), out);
        if (auto ai = s.find("additionalItems"); ai != s.end())
          for (size_t i = it->size(); i < v.size(); ++i) run(*ai, v[i], path + "/" + std::to_string(i), out);
      } else {
        for (size_t i = 0; i < v.size(); ++i) run(*it, v[i], path + "/" + std::to_string(i), out);
      }
    }
    if (auto m = s.find("maxItems"); m != s.end() && m->is_number() && double(v.size()) > m->get<double>())
      add("more than " + m->dump() + " items");
    if (auto m = s.find("minItems"); m != s.end() && m->is_number() && double(v.size()) < m->get<double>())
      add("fewer than " + m->dump() + " items");
    if (auto u = s.find("uniqueItems"); u != s.end() && u->is_boolean() && u->get<bool>()) {
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = i + 1; j < v.size(); ++j)
          if (equal(v[i], v[j])) {
            add("items " + std::to_string(i) + " and " + std::to_string(j) + " are equal");
            i = j = v.size();
          }
    }
    if (auto c = s.find("contains"); c != s.end()) {
      bool any = false;
      for (const auto& x : v) any = any || valid(*c, x);
      if (!any) add("no item matches 'contains'");
    }
  }

  template <class Add>
  void object_checks(const json& s, const json& v, const std::string& path, std::vector<SchemaViolation>& out, Add& add) {
    if (auto m = s.find("maxProperties"); m != s.end() && m->is_number() && double(v.size()) > m->get<double>())
      add("more than " + m->dump() + " properties");
    if (auto m = s.find("minProperties"); m != s.end() && m->is_number() && double(v.size()) < m->get<double>())
      add("fewer than " + m->dump() + " properties");
    if (auto r = s.find("required"); r != s.end() && r->is_array())
      for (const auto& k : *r)
        if (k.is_string() && !v.contains(k.get<std::string>()))
          add("required property '" + k.get<std::string>() + "' is missing");
    const auto props = s.find("properties");
    const auto pats = s.find("patternProperties");
    const auto addl = s.find("additionalProperties");
    for (auto it = v.begin(); it != v.end(); ++it) {
      const std::string child = path + "/" + pointer_escape(it.key());
      bool matched = false;
      if (props != s.end() && props->is_object()) {
        if (auto p = props->find(it.key()); p != props->end()) {
          matched = true;
          run(*p, *it, child, out);
        }
      }
      if (pats != s.end() && pats->is_object())
        for (auto p = pats->begin(); p != pats->end(); ++p)
          if (std::regex_search(it.key(), regex(p.key()))) {
            matched = true;
            run(*p, *it, child, out);
          }
      if (!matched && addl != s.end()) {
        if (addl->is_boolean() && !addl->get<bool>()) out.push_back({child, "property '" + it.key() + "' is not allowed"});
        else run(*addl, *it, child, out);
      }
    }
    if (auto d = s.find("dependencies"); d != s.end() && d->is_object())
      for (auto it = d->begin(); it != d->end(); ++it) {
        if (!v.contains(it.key())) continue;
        if (it->is_array()) {
          for (const auto& k : *it)
            if (k.is_string() && !v.contains(k.get<std::string>()))
              add("property '" + it.key() + "' requires '" + k.get<std::string>() + "'");
        } else {
          run(*it, v, path, out);
        }
      }
    if (auto pn = s.find("propertyNames"); pn != s.end())
      for (auto it = v.begin(); it != v.end(); ++it)
        if (!valid(*pn, json(it.key()))) add("property name '" + it.key() + "' is not allowed");
  }

  const std::regex& regex(const std::string& pattern) {
    auto it = regexes_.find(pattern);
    if (it != regexes_.end()) return it->second;
    try {
      return regexes_.emplace(pattern, std::regex(pattern, std::regex::ECMAScript)).first->second;
    } catch (const std::regex_error& e) {
      throw Error(ErrorKind::kInvalidInput, "", "pattern", "invalid regular expression '" + pattern + "': " + e.what());
    }
  }

  const json& root_;
  std::unordered_map<std::string, std::regex> regexes_;
};

}  // namespace

std::vector<SchemaViolation> validate_json(const nlohmann::json& schema, const nlohmann::json& instance) {
  std::vector<SchemaViolation> out;
  Validator(schema).run(schema, instance, "", out);
  return out;
}

}  // namespace qloom::agent
