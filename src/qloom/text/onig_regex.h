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

// Matching runs under Oniguruma's limits, set once for the process to the
// library defaults that HF tokenizers (the onig crate) runs with: at most
// kOnigRetryLimitInMatch backtracking retries per match attempt, no
// separate limit per search, no match-stack or subexpression-call limit.
// A match that hits a limit (catastrophic backtracking) is an error, as in
// HF, never "no more matches".
inline constexpr unsigned long kOnigRetryLimitInMatch = 10'000'000;

class OnigRegex {
 public:
  // Throws qloom::Error kInvalidInput naming `source` and `item` when the
  // pattern does not compile.
  explicit OnigRegex(const std::string& pattern, const std::string& item = "pattern",
                     const std::string& source = "tokenizer.json");
  ~OnigRegex();
  OnigRegex(OnigRegex&&) noexcept;
  OnigRegex& operator=(OnigRegex&&) noexcept;

  // All matches left to right, as onig's find_iter: an empty match right
  // after the previous match is skipped by advancing one character.
  // Throws kInvalidInput naming the pattern and the byte offset where a
  // search hit an Oniguruma limit (or failed otherwise).
  std::vector<Range> find_all(std::string_view text) const;
  // True when the whole of `text` matches; throws as find_all.
  bool matches_whole(std::string_view text) const;

 private:
  [[noreturn]] void throw_match_error(int code, size_t pos, size_t text_size) const;

  void* re_ = nullptr;  // OnigRegex (regex_t*)
  std::string pattern_, item_, source_;
};

// What Replace makes of `text` with every match in `m` (sorted, not
// overlapping) replaced by `content`: replaced_size() counts its bytes,
// stopping as soon as they pass `cap` (so a hostile count cannot overflow);
// replace_ranges() builds it, `size` being replaced_size()'s answer.
size_t replaced_size(std::string_view text, const std::vector<Range>& m, size_t content_size, size_t cap);
std::string replace_ranges(std::string_view text, const std::vector<Range>& m, std::string_view content,
                           size_t size);

// Split / Replace pattern: {"String": s} (literal) or {"Regex": r}.
class Pattern {
 public:
  static Pattern literal(std::string s);
  static Pattern regex(const std::string& r, const std::string& item,
                       const std::string& source = "tokenizer.json");
  // Non-overlapping matches, left to right.
  std::vector<Range> find_all(std::string_view text) const;

 private:
  std::string literal_;
  std::shared_ptr<OnigRegex> regex_;
};

}  // namespace qloom::text
