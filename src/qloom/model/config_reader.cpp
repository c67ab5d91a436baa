#include "qloom/model/config_reader.h"

#include "qloom/core/error.h"

namespace qloom::model {

const nlohmann::json* ConfigReader::get(const char* key) const {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

void ConfigReader::bad(const char* key, const std::string& what) const {
  const std::string f = field(key);
  throw_invalid(source, f, "config field \"" + f + "\" " + what, "fix config.json");
}

void ConfigReader::unsupported(const char* key, const std::string& what, const std::string& remedy) const {
  const std::string f = field(key);
  throw Error(ErrorKind::kUnsupported, source, f, "config field \"" + f + "\" " + what, remedy);
}

int64_t ConfigReader::integer(const char* key, int64_t def, bool required) const {
  const nlohmann::json* v = get(key);
  if (!v) {
    if (required) bad(key, "is missing");
    return def;
  }
  if (!v->is_number_integer()) bad(key, "must be an integer");
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    bad(key, "is out of range");
  return v->get<int64_t>();
}

int64_t ConfigReader::positive(const char* key, int64_t def, bool required) const {
  const int64_t v = integer(key, def, required);
  if (v <= 0) bad(key, "must be positive");
  return v;
}

double ConfigReader::number(const char* key, double def) const {
  const nlohmann::json* v = get(key);
  if (!v) return def;
  if (!v->is_number()) bad(key, "must be a number");
  return v->get<double>();
}

bool ConfigReader::boolean(const char* key, bool def) const {
  const nlohmann::json* v = get(key);
  if (!v) return def;
  if (!v->is_boolean()) bad(key, "must be true or false");
  return v->get<bool>();
}

std::string ConfigReader::string(const char* key, const std::string& def) const {
  const nlohmann::json* v = get(key);
  if (!v) return def;
  if (!v->is_string()) bad(key, "must be a string");
  return v->get<std::string>();
}

}  // namespace qloom::model
