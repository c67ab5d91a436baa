// cat({"a", b, "c"}): string concatenation by appends (gcc 12 warns falsely,
// -Wrestrict, on `"literal" + std::string`). Internal to io/hub*.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace qloom::io {

inline std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out += p;
  return out;
}

}  // namespace qloom::io
