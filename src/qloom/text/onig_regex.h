// Oniguruma regex as HuggingFace tokenizers uses it (the onig crate's
// Regex::new: ONIG_SYNTAX_DEFAULT, ONIG_OPTION_NONE, UTF-8), and the literal
// or regex Pattern that Split / Replace take.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qloom::text {

using Range = std::pair<size_t, size_t>;  // byte offsets [first, second)

class OnigRegex {
 public:
  // Throws qloom::Error kInvalidInput naming `item` when the pattern does not compile.
  explicit OnigRegex(const std::string& pattern, const std::string& item = "pattern");
  ~OnigRegex();
  OnigRegex(OnigRegex&&) noexcept;
  OnigRegex& operator=(OnigRegex&&) noexcept;

  // All matches left to right, as onig's find_iter: an empty match right
  // after the previous match is skipped by advancing one character.
  std::vector<Range> find_all(std::string_view text) const;
  // True when the whole of `text` matches.
  bool matches_whole(std::string_view text) const;

 private:
  void* re_ = nullptr;  // OnigRegex (regex_t*)
};

// Split / Replace pattern: {"String": s} (literal) or {"Regex": r}.
class Pattern {
 public:
  static Pattern literal(std::string s);
  static Pattern regex(const std::string& r, const std::string& item);
  // Non-overlapping matches, left to right.
  std::vector<Range> find_all(std::string_view text) const;

 private:
  std::string literal_;
  std::shared_ptr<OnigRegex> regex_;
};

}  // namespace qloom::text
