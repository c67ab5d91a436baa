// Strict readers for the search modules' from_json (sensitivity, candidates):
// a missing key or a value of the wrong type is Error(kInvalidInput) naming
// the JSON path (e.g. "mix_precision_search.sensitivity.entries[3].kld_mean")
// and saying the stored state is damaged. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace qloom::perf::detail {

// j must be an object; `where` is its path.
const nlohmann::json& field(const nlohmann::json& j, const std::string& where, const char* key);
void require_object(const nlohmann::json& j, const std::string& where);
void require_array(const nlohmann::json& j, const std::string& where);
std::string get_string(const nlohmann::json& j, const std::string& where, const char* key);
double get_number(const nlohmann::json& j, const std::string& where, const char* key);
int64_t get_int(const nlohmann::json& j, const std::string& where, const char* key);
bool get_bool(const nlohmann::json& j, const std::string& where, const char* key);
// null (or an absent key) -> nullopt.
std::optional<double> get_optional_number(const nlohmann::json& j, const std::string& where, const char* key);
// JSON for an optional number: the value or null.
nlohmann::ordered_json number_or_null(const std::optional<double>& v);

[[noreturn]] void bad_field(const std::string& where, const std::string& message);

}  // namespace qloom::perf::detail
