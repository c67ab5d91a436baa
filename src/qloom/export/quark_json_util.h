// Small helpers shared by the quantization_config reader / writer
// (quark_spec_json.cpp, quark_config.cpp): error construction with the JSON
// location of the offending item.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "qloom/core/error.h"

namespace qloom::exporter::detail {

inline constexpr const char* kRemedyQuark =
    "the quantization_config must be one written by AMD Quark (hf_format export)";

inline std::string join_item(const std::string& where, const std::string& key) {
  if (where.empty()) return key;
  return where + "." + key;
}

[[noreturn]] inline void bad(ErrorKind kind, const std::string& file, const std::string& item,
                             const std::string& msg, const std::string& remedy) {
  throw Error(kind, file, item, msg, remedy);
}

template <class J>
std::string type_name(const J& v) {
  return v.type_name();
}

}  // namespace qloom::exporter::detail
