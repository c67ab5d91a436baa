// Python str methods the lm-eval task code applies to document text, with
// Python's semantics: strip / rstrip remove Unicode whitespace
// (str.isspace), replace substitutes every non-overlapping occurrence left
// to right.
#pragma once

#include <string>
#include <string_view>

namespace qloom::eval {

std::string py_strip(std::string_view s);
std::string py_rstrip(std::string_view s);
std::string py_replace(std::string_view s, std::string_view from, std::string_view to);

}  // namespace qloom::eval
