#include "qloom/validate/name_patterns.h"

#include <array>

namespace qloom::validate {

std::string canonicalize_tensor_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    const std::string_view seg =
        name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    bool digits = !seg.empty();
    for (char c : seg) digits = digits && c >= '0' && c <= '9';
    if (digits) out += '*';
    else out.append(seg);
    if (dot == std::string_view::npos) break;
    out += '.';
    start = dot + 1;
  }
  return out;
}

namespace {

// Matches one character against the set starting at pattern[i] == '['. On
// success stores the index just past the closing ']' in *next. A '[' with no
// closing ']' is an ordinary character (as in fnmatch).
bool match_set(std::string_view p, size_t i, char c, bool* matched, size_t* next) {
  size_t j = i + 1;
  bool negate = false;
  if (j < p.size() && (p[j] == '!' || p[j] == '^')) negate = true, ++j;
  const size_t first = j;
  bool hit = false;
  while (j < p.size() && (p[j] != ']' || j == first)) {
    if (j + 2 < p.size() && p[j + 1] == '-' && p[j + 2] != ']') {
      if (p[j] <= c && c <= p[j + 2]) hit = true;
      j += 3;
    } else {
      if (p[j] == c) hit = true;
      ++j;
    }
  }
  if (j >= p.size()) return false;  // unterminated: not a set
  *matched = hit != negate;
  *next = j + 1;
  return true;
}

}  // namespace

bool glob_match(std::string_view p, std::string_view t) {
  size_t pi = 0, ti = 0;
  size_t star_p = std::string_view::npos, star_t = 0;
  while (ti < t.size()) {
    if (pi < p.size()) {
      const char pc = p[pi];
      if (pc == '*') {
        star_p = pi++;
        star_t = ti;
        continue;
      }
      if (pc == '?') {
        ++pi, ++ti;
        continue;
      }
      if (pc == '[') {
        bool matched = false;
        size_t next = 0;
        if (match_set(p, pi, t[ti], &matched, &next)) {
          if (matched) {
            pi = next, ++ti;
            continue;
          }
        } else if (t[ti] == '[') {
          ++pi, ++ti;
          continue;
        }
      } else if (pc == t[ti]) {
        ++pi, ++ti;
        continue;
      }
    }
    // Mismatch: let the last star swallow one more character, or fail.
    if (star_p == std::string_view::npos) return false;
    pi = star_p + 1;
    ti = ++star_t;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::string_view quantization_suffix(std::string_view name) {
  // prob_output_scale: an attention module's softmax-output scale
  // (--attention_dtype fp8, Quark's softmax_quant_spec); *_2: the second stage
  // of a two-stage spec (Quark's LOAD_MAP_MULTI: int4_fp8's weight_scale_2 /
  // weight_zero_point_2, nvfp4's weight_scale_2 / input_scale_2).
  static constexpr std::array<std::string_view, 11> kSuffixes = {
      "weight_scale",      "weight_zero_point", "input_scale",         "input_zero_point",
      "output_scale",      "output_zero_point", "prob_output_scale",   "weight_scale_2",
      "weight_zero_point_2", "input_scale_2",   "output_scale_2"};
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos) return {};
  const std::string_view last = name.substr(dot + 1);
  for (std::string_view s : kSuffixes)
    if (last == s) return s;
  return {};
}

std::string_view module_of(std::string_view tensor_name) {
  const size_t dot = tensor_name.rfind('.');
  return dot == std::string_view::npos ? std::string_view{} : tensor_name.substr(0, dot);
}

}  // namespace qloom::validate
