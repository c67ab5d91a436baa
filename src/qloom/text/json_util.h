// Small accessors for tokenizer.json fields that throw qloom::Error
// kInvalidInput naming the file and field when a field is missing or of the
// wrong type.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace qloom::text::json_util {

// Containers nested deeper than this in tokenizer.json or
// tokenizer_config.json are an error (real files: under 10), which also
// bounds the recursion over nested Sequence components.
inline constexpr int kMaxJsonDepth = 64;

// Parses a tokenizer file's JSON text (repeated keys: the last wins, as
// before); throws kInvalidInput naming `source` when it is not valid JSON or
// nests deeper than kMaxJsonDepth.
nlohmann::json parse_document(std::string_view text, const std::string& source);

// j[key] as T; `dflt` when absent or null.
template <class T>
T get_or(const nlohmann::json& j, const char* key, T dflt, const std::string& source,
         const std::string& item);
// j[key] as T; throws when absent.
template <class T>
T get(const nlohmann::json& j, const char* key, const std::string& source, const std::string& item);

[[noreturn]] void bad_field(const std::string& source, const std::string& item,
                            const std::string& message);
[[noreturn]] void unsupported(const std::string& source, const std::string& item,
                              const std::string& message);

template <class T>
T get_or(const nlohmann::json& j, const char* key, T dflt, const std::string& source,
         const std::string& item) {
  if (!j.is_object()) bad_field(source, item, "expected an object");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception& e) {
    std::string f = item;
    f += ".";
    f += key;
    bad_field(source, f, e.what());
  }
}

template <class T>
T get(const nlohmann::json& j, const char* key, const std::string& source,
      const std::string& item) {
  std::string f = item;
  f += ".";
  f += key;
  if (!j.is_object()) bad_field(source, item, "expected an object");
  auto it = j.find(key);
  if (it == j.end()) bad_field(source, f, "missing field");
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception& e) {
    bad_field(source, f, e.what());
  }
}

}  // namespace qloom::text::json_util
