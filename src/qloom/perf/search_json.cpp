#include "qloom/perf/search_json.h"

#include "qloom/core/error.h"

namespace qloom::perf::detail {

void bad_field(const std::string& where, const std::string& message) {
  throw Error(ErrorKind::kInvalidInput, "", where, message,
              "the stored search state is damaged; remove it to measure again");
}

void require_object(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) bad_field(where, "expected a JSON object");
}

void require_array(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) bad_field(where, "expected a JSON array");
}

const nlohmann::json& field(const nlohmann::json& j, const std::string& where, const char* key) {
  require_object(j, where);
  const auto it = j.find(key);
  if (it == j.end()) bad_field(where + "." + key, "missing");
  return *it;
}

std::string get_string(const nlohmann::json& j, const std::string& where, const char* key) {
  const nlohmann::json& v = field(j, where, key);
  if (!v.is_string()) bad_field(where + "." + key, "expected a string");
  return v.get<std::string>();
}

double get_number(const nlohmann::json& j, const std::string& where, const char* key) {
  const nlohmann::json& v = field(j, where, key);
  if (!v.is_number()) bad_field(where + "." + key, "expected a number");
  return v.get<double>();
}

int64_t get_int(const nlohmann::json& j, const std::string& where, const char* key) {
  const nlohmann::json& v = field(j, where, key);
  if (!v.is_number_integer()) bad_field(where + "." + key, "expected an integer");
  return v.get<int64_t>();
}

bool get_bool(const nlohmann::json& j, const std::string& where, const char* key) {
  const nlohmann::json& v = field(j, where, key);
  if (!v.is_boolean()) bad_field(where + "." + key, "expected true or false");
  return v.get<bool>();
}

std::optional<double> get_optional_number(const nlohmann::json& j, const std::string& where, const char* key) {
  require_object(j, where);
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) bad_field(where + "." + key, "expected a number or null");
  return it->get<double>();
}

nlohmann::ordered_json number_or_null(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
}

}  // namespace qloom::perf::detail
