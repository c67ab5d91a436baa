#include "qloom/text/onig_regex.h"

#include <oniguruma.h>

#include <mutex>

#include "qloom/core/error.h"
#include "qloom/text/unicode.h"

namespace qloom::text {

namespace {
void onig_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding enc[] = {ONIG_ENCODING_UTF8};
    onig_initialize(enc, 1);
    // Pinned rather than left to how the system library was built.
    onig_set_retry_limit_in_match(kOnigRetryLimitInMatch);
    onig_set_retry_limit_in_search(0);
    onig_set_match_stack_limit_size(0);
    onig_set_subexp_call_limit_in_search(0);
  });
}

// At most 80 bytes of `pattern` (cut at a character boundary) for messages.
std::string shown_pattern(const std::string& pattern) {
  constexpr size_t kMax = 80;
  if (pattern.size() <= kMax) return pattern;
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(pattern[cut]) & 0xC0) == 0x80) --cut;
  return pattern.substr(0, cut) + "... (" + std::to_string(pattern.size()) + " bytes)";
}
const OnigUChar* u(std::string_view s) { return reinterpret_cast<const OnigUChar*>(s.data()); }
}  // namespace

OnigRegex::OnigRegex(const std::string& pattern, const std::string& item, const std::string& source)
    : pattern_(pattern), item_(item), source_(source) {
  onig_init_once();
  regex_t* re = nullptr;
  OnigErrorInfo einfo;
  const int r = onig_new(&re, u(pattern), u(pattern) + pattern.size(), ONIG_OPTION_NONE,
                         ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &einfo);
  if (r != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, r, &einfo);
    std::string m = "regex does not compile: ";
    m += reinterpret_cast<const char*>(msg);
    m += " (pattern ";
    m += shown_pattern(pattern);
    m += ")";
    throw Error(ErrorKind::kInvalidInput, source, item, m);
  }
  re_ = re;
}

OnigRegex::~OnigRegex() {
  if (re_) onig_free(static_cast<regex_t*>(re_));
}
OnigRegex::OnigRegex(OnigRegex&& o) noexcept
    : re_(o.re_), pattern_(std::move(o.pattern_)), item_(std::move(o.item_)), source_(std::move(o.source_)) {
  o.re_ = nullptr;
}
OnigRegex& OnigRegex::operator=(OnigRegex&& o) noexcept {
  std::swap(re_, o.re_);
  std::swap(pattern_, o.pattern_);
  std::swap(item_, o.item_);
  std::swap(source_, o.source_);
  return *this;
}

void OnigRegex::throw_match_error(int code, size_t pos, size_t text_size) const {
  OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
  onig_error_code_to_str(msg, code);
  std::string m = "regex ";
  m += shown_pattern(pattern_);
  m += " failed searching from byte " + std::to_string(pos) + " of a " + std::to_string(text_size) +
       "-byte text: ";
  m += reinterpret_cast<const char*>(msg);
  if (code == ONIGERR_RETRY_LIMIT_IN_MATCH_OVER) {
    m += " (over " + std::to_string(kOnigRetryLimitInMatch) + " backtracking steps in one match)";
  }
  throw Error(ErrorKind::kInvalidInput, source_, item_, m,
              "the pattern backtracks catastrophically on this text (HF tokenizers fails the same way); "
              "fix the pattern in the tokenizer file or shorten the input");
}

std::vector<Range> OnigRegex::find_all(std::string_view text) const {
  std::vector<Range> out;
  auto* re = static_cast<regex_t*>(re_);
  OnigRegion* region = onig_region_new();
  const OnigUChar* begin = u(text);
  const OnigUChar* end = begin + text.size();
  size_t pos = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (pos <= text.size()) {
    onig_region_clear(region);
    const int r = onig_search(re, begin, end, begin + pos, end, region, ONIG_OPTION_NONE);
    if (r == ONIG_MISMATCH) break;
    if (r < 0) {
      onig_region_free(region, 1);
      throw_match_error(r, pos, text.size());
    }
    const auto s = static_cast<size_t>(region->beg[0]);
    const auto e = static_cast<size_t>(region->end[0]);
    if (s == e && have_last && last_end == e) {
      pos += pos < text.size() ? utf8_len(static_cast<unsigned char>(text[pos])) : 1;
      continue;
    }
    out.emplace_back(s, e);
    pos = e;
    have_last = true;
    last_end = e;
  }
  onig_region_free(region, 1);
  return out;
}

bool OnigRegex::matches_whole(std::string_view text) const {
  const OnigUChar* begin = u(text);
  const int r = onig_match(static_cast<regex_t*>(re_), begin, begin + text.size(), begin,
                           nullptr, ONIG_OPTION_NONE);
  if (r < 0 && r != ONIG_MISMATCH) throw_match_error(r, 0, text.size());
  return r == static_cast<int>(text.size());
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

Pattern Pattern::regex(const std::string& r, const std::string& item, const std::string& source) {
  Pattern p;
  p.regex_ = std::make_shared<OnigRegex>(r, item, source);
  return p;
}

std::vector<Range> Pattern::find_all(std::string_view text) const {
  if (regex_) return regex_->find_all(text);
  std::vector<Range> out;
  if (literal_.empty()) return out;
  for (size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos + literal_.size())) {
    out.emplace_back(pos, pos + literal_.size());
  }
  return out;
}

size_t replaced_size(std::string_view text, const std::vector<Range>& m, size_t content_size, size_t cap) {
  size_t size = text.size();
  for (const auto& [s, e] : m) {
    size = size - (e - s) + content_size;
    if (size > cap) break;
  }
  return size;
}

std::string replace_ranges(std::string_view text, const std::vector<Range>& m, std::string_view content,
                           size_t size) {
  std::string out;
  out.reserve(size);
  size_t last = 0;
  for (const auto& [s, e] : m) {
    out.append(text, last, s - last);
    out += content;
    last = e;
  }
  out.append(text, last, std::string_view::npos);
  return out;
}

}  // namespace qloom::text
