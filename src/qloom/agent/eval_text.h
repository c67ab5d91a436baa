// Text helpers the eval phase and its metric resolution share: name
// normalization and the one-line, classifier-safe reasons of eval_skipped.txt.
#pragma once

#include <cctype>
#include <initializer_list>
#include <string>
#include <string_view>

namespace qloom::agent::eval_text {

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Lowercase, trimmed, ' ' and '-' read as '_'.
inline std::string normalize_name(std::string_view s) {
  std::string out = lower(s);
  const size_t b = out.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  out = out.substr(b, out.find_last_not_of(" \t\r\n") - b + 1);
  for (char& c : out)
    if (c == ' ' || c == '-') c = '_';
  return out;
}

inline bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

// One line: newlines and tabs become spaces.
inline std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s;
}

// Inserts a zero-width space after the first letter of every occurrence (any
// case) of `words`, so outcomes.h's substring classifier cannot see them.
inline std::string defuse(std::string text, std::initializer_list<std::string_view> words) {
  static const std::string kZwsp = "\xE2\x80\x8B";
  for (std::string_view w : words) {
    size_t pos = 0;
    for (;;) {
      pos = lower(text).find(w, pos);
      if (pos == std::string::npos) break;
      text.insert(pos + 1, kZwsp);
      pos += 1 + kZwsp.size();
    }
  }
  return text;
}

inline std::string env_reason(const std::string& text) {
  return defuse(one_line(text), {"oom", "vllm", "sglang", "quantized_load"});
}

}  // namespace qloom::agent::eval_text
