// config.json as transformers writes it: the source config with
// quantization_config set, serialized like PretrainedConfig.to_json_string
// (declared in quark_config.h).
#include <string>

#include "qloom/core/error.h"
#include "qloom/export/quark_config.h"

namespace qloom::exporter {

using nlohmann::json;
using nlohmann::ordered_json;

json quantized_config_json(const json& source_config, const ordered_json& qc) {
  if (!source_config.is_object())
    throw Error(ErrorKind::kInvalidInput, "config.json", "",
                std::string("the source config is not a JSON object (got ") +
                    source_config.type_name() + ")",
                "fix the source model's config.json");
  json out = source_config;
  out["quantization_config"] = json::parse(qc.dump());
  return out;
}

namespace {

// nlohmann writes doubles in [1e15, 1e16) in exponent form ("1e+15"), Python's
// repr in fixed form ("1000000000000000.0"); both use the shortest round-trip
// digits, so only that notation differs.
std::string python_float(double d) {
  std::string s = json(d).dump();
  const size_t e = s.find("e+15");
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e);
  std::string sign;
  if (!mant.empty() && mant[0] == '-') {
    sign = "-";
    mant.erase(0, 1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  // mant = d.ddd, exponent 15: 16 digits before the point.
  if (digits.size() <= 16) return sign + digits + std::string(16 - digits.size(), '0') + ".0";
  return sign + digits.substr(0, 16) + "." + digits.substr(16);
}

std::string python_string(const std::string& v) {
  // ensure_ascii: non-ASCII as lowercase \uXXXX (surrogate pairs above
  // U+FFFF), like nlohmann's ensure_ascii; Python also escapes DEL.
  std::string s = json(v).dump(-1, ' ', /*ensure_ascii=*/true);
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\x7f')
      out += "\\u007f";
    else
      out += c;
  }
  return out;
}

void dump_py(const json& j, int indent, std::string& out) {
  switch (j.type()) {
    case json::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      out += "{\n";
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {  // std::map order = sort_keys
        if (!first) out += ",\n";
        first = false;
        out.append(static_cast<size_t>(indent + 2), ' ');
        out += python_string(it.key());
        out += ": ";
        dump_py(it.value(), indent + 2, out);
      }
      out += "\n";
      out.append(static_cast<size_t>(indent), ' ');
      out += "}";
      return;
    }
    case json::value_t::array: {
      if (j.empty()) {
        out += "[]";
        return;
      }
      out += "[\n";
      bool first = true;
      for (const auto& v : j) {
        if (!first) out += ",\n";
        first = false;
        out.append(static_cast<size_t>(indent + 2), ' ');
        dump_py(v, indent + 2, out);
      }
      out += "\n";
      out.append(static_cast<size_t>(indent), ' ');
      out += "]";
      return;
    }
    case json::value_t::string: out += python_string(j.get_ref<const std::string&>()); return;
    case json::value_t::number_float: out += python_float(j.get<double>()); return;
    default: out += j.dump(); return;  // null, bool, integers
  }
}

}  // namespace

std::string dump_hf_json(const json& j) {
  // json.dumps(obj, indent=2, sort_keys=True) + "\n": item separator ",",
  // key separator ": ", nested containers indented by two more spaces, empty
  // containers as {} / [], keys sorted by code point (std::map of UTF-8
  // strings sorts the same way).
  std::string out;
  dump_py(j, 0, out);
  out += '\n';
  return out;
}

}  // namespace qloom::exporter
