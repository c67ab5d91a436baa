// json.dumps as transformers' tojson filter calls it: ensure_ascii=False by
// default, Python's separators (", " and ": "; "," when indented), dict order
// kept unless sort_keys, floats as Python's repr, NaN/Infinity as Python writes
// them. Undefined, callables and namespaces are not serializable (TypeError).
#include <algorithm>

#include "qloom/text/jinja/budget.h"
#include "qloom/text/jinja/runtime.h"
#include "qloom/text/unicode.h"

namespace qloom::text::jinja {
namespace {

void hex4(std::string& out, unsigned v) {
  char b[16];
  std::snprintf(b, sizeof b, "\\u%04x", v & 0xFFFFu);
  out += b;
}

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  charge_work(s.size());
  out += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t start = i;
      char32_t cp = next_codepoint(s, i);
      if (!ensure_ascii) {
        out.append(s, start, i - start);
      } else if (cp >= 0x10000) {
        hex4(out, 0xD800 + ((cp - 0x10000) >> 10));
        hex4(out, 0xDC00 + ((cp - 0x10000) & 0x3FF));
      } else {
        hex4(out, cp);
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) hex4(out, c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
}

std::string dump_float(double d) {
  if (d != d) return "NaN";
  if (d > 1.7976931348623157e308) return "Infinity";
  if (d < -1.7976931348623157e308) return "-Infinity";
  return format_float(d);
}

class Dumper {
 public:
  explicit Dumper(const DumpOptions& o) : o_(o) {}
  void dump(const Value& v, int level);
  std::string out;

 private:
  void newline(int level) {
    if (!o_.indent_set) return;
    check_size(out.size() + o_.indent.size() * static_cast<size_t>(level), "the result of tojson");
    out += '\n';
    for (int i = 0; i < level; ++i) out += o_.indent;
  }
  void dump_list(const List& l, int level);
  void dump_dict(const Dict& d, int level);
  const DumpOptions& o_;
};

void Dumper::dump(const Value& v, int level) {
  check_size(out.size(), "the result of tojson");
  charge_work(0);
  switch (v.kind()) {
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: out += dump_float(v.as_double()); return;
    case Value::Kind::kString: dump_string(out, v.as_string(), o_.ensure_ascii); return;
    case Value::Kind::kList: dump_list(v.as_list(), level); return;
    case Value::Kind::kDict:
      if (!v.is_namespace()) {
        dump_dict(v.as_dict(), level);
        return;
      }
      break;
    default: break;
  }
  eval_fail("Object of type " + v.type_name() + " is not JSON serializable");
}

void Dumper::dump_list(const List& l, int level) {
  if (l.empty()) {
    out += "[]";
    return;
  }
  check_value_depth(level + 1);
  out += '[';
  for (size_t i = 0; i < l.size(); ++i) {
    if (i) out += o_.item_sep;
    newline(level + 1);
    dump(l[i], level + 1);
  }
  newline(level);
  out += ']';
}

void Dumper::dump_dict(const Dict& d, int level) {
  if (d.size() == 0) {
    out += "{}";
    return;
  }
  check_value_depth(level + 1);
  std::vector<const std::pair<std::string, Value>*> items;
  for (const auto& kv : d.items()) items.push_back(&kv);
  if (o_.sort_keys)
    std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
  out += '{';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += o_.item_sep;
    newline(level + 1);
    dump_string(out, items[i]->first, o_.ensure_ascii);
    out += o_.key_sep;
    dump(items[i]->second, level + 1);
  }
  newline(level);
  out += '}';
}

}  // namespace

std::string dumps(const Value& v, const DumpOptions& options) {
  Dumper d(options);
  d.dump(v, 0);
  return std::move(d.out);
}

}  // namespace qloom::text::jinja
