#include "qloom/agent/yaml_json.h"

#include <charconv>
#include <cstdint>

#include <yaml-cpp/yaml.h>

#include "qloom/core/error.h"

namespace qloom::agent {
namespace {

bool plain_reads_as_other(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return true;
  static const char* kBool[] = {"true", "false", "True", "False", "TRUE", "FALSE", "yes", "no", "Yes", "No",
                                "YES", "NO", "on", "off", "On", "Off", "ON", "OFF", "y", "n", "Y", "N"};
  for (const char* b : kBool)
    if (s == b) return true;
  double d;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return true;
  if (s == ".inf" || s == "-.inf" || s == ".nan") return true;
  return false;
}

void emit(YAML::Emitter& out, const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [k, v] : j.items()) {
        out << YAML::Key;
        if (plain_reads_as_other(k)) out << YAML::DoubleQuoted;
        out << k << YAML::Value;
        emit(out, v);
      }
      out << YAML::EndMap;
      break;
    case nlohmann::json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& v : j) emit(out, v);
      out << YAML::EndSeq;
      break;
    case nlohmann::json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      if (plain_reads_as_other(s)) out << YAML::DoubleQuoted;
      out << s;
      break;
    }
    case nlohmann::json::value_t::null: out << YAML::Null; break;
    case nlohmann::json::value_t::boolean: out << (j.get<bool>() ? "true" : "false"); break;
    default: out << j.dump(); break;  // numbers: JSON's round-trip spelling
  }
}

nlohmann::ordered_json scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  int64_t i;
  auto r = std::from_chars(s.data(), s.data() + s.size(), i);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return i;
  uint64_t u;
  r = std::from_chars(s.data(), s.data() + s.size(), u);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return u;
  double d;
  r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return d;
  return s;
}

nlohmann::ordered_json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::ordered_json o = nlohmann::ordered_json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      for (const auto& v : n) a.push_back(to_json(v));
      return a;
    }
    case YAML::NodeType::Scalar: return scalar(n);
    default: return nullptr;
  }
}

}  // namespace

std::string json_to_yaml(const nlohmann::ordered_json& j) {
  YAML::Emitter out;
  out.SetIndent(2);
  emit(out, j);
  return std::string(out.c_str()) + "\n";
}

nlohmann::ordered_json yaml_to_json(const std::string& text, const std::string& file) {
  try {
    return to_json(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    throw_invalid(file, "", std::string("not valid YAML: ") + e.what(), "regenerate the file");
  }
}

}  // namespace qloom::agent
