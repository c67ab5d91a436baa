#include "qloom/eval/py_str.h"

#include "qloom/text/unicode.h"

namespace qloom::eval {
namespace {

// str.isspace: the White_Space property plus U+001C..U+001F (bidi class B / S).
bool is_py_space(char32_t cp) { return text::is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); }

size_t lstrip_end(std::string_view s) {
  size_t b = 0;
  while (b < s.size()) {
    size_t i = b;
    if (!is_py_space(text::next_codepoint(s, i))) break;
    b = i;
  }
  return b;
}

size_t rstrip_end(std::string_view s, size_t b) {
  size_t e = s.size();
  while (e > b) {
    size_t start = e - 1;
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!is_py_space(text::next_codepoint(s, i))) break;
    e = start;
  }
  return e;
}

}  // namespace

std::string py_strip(std::string_view s) {
  const size_t b = lstrip_end(s);
  return std::string(s.substr(b, rstrip_end(s, b) - b));
}

std::string py_rstrip(std::string_view s) { return std::string(s.substr(0, rstrip_end(s, 0))); }

std::string py_replace(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
    out.append(s.substr(pos, hit - pos));
    out.append(to);
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace qloom::eval
