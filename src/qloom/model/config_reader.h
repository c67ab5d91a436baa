// ConfigReader: typed, strict reads of one JSON object of config.json (the
// top level, text_config, or a rope dict) for ModelConfig::parse. A null
// value counts as absent. Errors are kInvalidInput naming `source` and the
// field (prefixed by `path`, e.g. "rope_parameters.factor").
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace qloom::model {

struct ConfigReader {
  const nlohmann::json& j;
  const std::string& source;
  std::string path;  // "" at the top level, else "rope_scaling." etc.

  const nlohmann::json* get(const char* key) const;
  bool has(const char* key) const { return get(key) != nullptr; }
  std::string field(const char* key) const { return path + key; }

  [[noreturn]] void bad(const char* key, const std::string& what) const;
  [[noreturn]] void unsupported(const char* key, const std::string& what,
                                const std::string& remedy = "use a checkpoint without this feature") const;

  int64_t integer(const char* key, int64_t def, bool required = false) const;
  int64_t positive(const char* key, int64_t def, bool required = false) const;
  double number(const char* key, double def) const;
  bool boolean(const char* key, bool def) const;
  std::string string(const char* key, const std::string& def) const;
};

}  // namespace qloom::model
