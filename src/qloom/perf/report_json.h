// Typed, path-naming access to the session's state.json for the report
// builders (perf/report_facts.h). A Field is a view of one JSON value plus the
// dotted path that reached it ("mix_precision_search.candidate_queue[2].rank");
// every accessor that finds a value missing or of the wrong type throws
// qloom::Error(kInvalidInput) with file = the source label ("state.json") and
// item = that path, so a malformed state names the field at fault.
//
// Inputs: a JSON document the caller keeps alive for the Field's lifetime.
// Errors: as above; nothing else throws. Thread-safety: a Field is a
// read-only view; concurrent reads of the same document are safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qloom::perf {

class Field {
 public:
  using Json = nlohmann::ordered_json;

  // `source` names the file in errors and must outlive the Field.
  Field(const Json& value, std::string path, const std::string& source);

  const std::string& path() const { return path_; }
  const Json& raw() const { return *value_; }
  // False for a missing key and for JSON null.
  bool present() const { return !value_->is_null(); }

  // A member (missing -> a null Field carrying the path) / an array element.
  // The parent must be an object / array when present (else throws).
  Field operator[](std::string_view key) const;
  Field operator[](size_t index) const;
  size_t size() const;  // elements of an array (0 when absent); throws for a non-array

  // Required values: throw when missing, null or of another type.
  const Json& object() const;
  const Json& array() const;
  std::string string() const;
  double number() const;
  int64_t integer() const;
  bool boolean() const;
  // `string()` that must also be one of `allowed` (comma separated in errors).
  std::string one_of(std::initializer_list<std::string_view> allowed) const;

  // Optional values: JSON null when missing or null, else the value, which
  // must have the named type (else throws).
  Json opt_number() const;
  Json opt_integer() const;
  Json opt_string() const;
  Json opt_bool() const;
  Json opt_object() const;

  // Throws the typed error for this field with `message`.
  [[noreturn]] void fail(const std::string& message) const;

 private:
  const Json* value_;
  std::string path_;
  const std::string* source_;
};

}  // namespace qloom::perf
