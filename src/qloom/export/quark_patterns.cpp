// Quark's layer-name patterns: exclude expansion (amd-quark 0.12) and
// Python's fnmatch (declared in quark_config.h).
#include <string>
#include <string_view>
#include <vector>

#include "qloom/export/quark_config.h"

namespace qloom::exporter {

std::vector<std::string> expand_exclude(const std::vector<std::string>& exclude) {
  // QConfig.__post_init__ (quark/torch/quantization/config/config.py, 0.12;
  // 0.13 matches exclude entries verbatim):
  //   if not item.endswith(".*"): new_exclude.append(item + ".*")
  //   new_exclude.append(item)
  std::vector<std::string> out;
  for (const auto& p : exclude) {
    const bool ends = p.size() >= 2 && p.compare(p.size() - 2, 2, ".*") == 0;
    if (!ends) out.push_back(p + ".*");
    out.push_back(p);
  }
  return out;
}

namespace {

// Matches one "[...]" class at pattern[pi] against c. Returns the index just
// past the class, or npos when the '[' has no closing ']' (then it is a
// literal '['), like Python's fnmatch.translate.
size_t match_class(std::string_view pat, size_t pi, char c, bool* matched) {
  size_t i = pi + 1;
  bool negate = false;
  if (i < pat.size() && pat[i] == '!') {
    negate = true;
    ++i;
  }
  const size_t first = i;
  // A ']' right after '[' or '[!' is a literal member.
  if (i < pat.size() && pat[i] == ']') ++i;
  while (i < pat.size() && pat[i] != ']') ++i;
  if (i >= pat.size()) return std::string_view::npos;
  bool hit = false;
  for (size_t k = first; k < i; ++k) {
    if (k + 2 < i && pat[k + 1] == '-') {
      if (pat[k] <= c && c <= pat[k + 2]) hit = true;
      k += 2;
    } else if (pat[k] == c) {
      hit = true;
    }
  }
  *matched = negate ? !hit : hit;
  return i + 1;
}

bool fnmatch_at(std::string_view s, size_t si, std::string_view p, size_t pi) {
  while (pi < p.size()) {
    const char pc = p[pi];
    if (pc == '*') {
      while (pi < p.size() && p[pi] == '*') ++pi;
      if (pi == p.size()) return true;
      for (size_t k = si; k <= s.size(); ++k)
        if (fnmatch_at(s, k, p, pi)) return true;
      return false;
    }
    if (si >= s.size()) return false;
    if (pc == '?') {
      ++si;
      ++pi;
      continue;
    }
    if (pc == '[') {
      bool m = false;
      const size_t next = match_class(p, pi, s[si], &m);
      if (next != std::string_view::npos) {
        if (!m) return false;
        ++si;
        pi = next;
        continue;
      }
      // literal '['
    }
    if (s[si] != pc) return false;
    ++si;
    ++pi;
  }
  return si == s.size();
}

}  // namespace

bool fnmatch(std::string_view name, std::string_view pattern) { return fnmatch_at(name, 0, pattern, 0); }

}  // namespace qloom::exporter
