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
  });
}
const OnigUChar* u(std::string_view s) { return reinterpret_cast<const OnigUChar*>(s.data()); }
}  // namespace

OnigRegex::OnigRegex(const std::string& pattern, const std::string& item) {
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
    m += pattern;
    m += ")";
    throw Error(ErrorKind::kInvalidInput, "tokenizer.json", item, m);
  }
  re_ = re;
}

OnigRegex::~OnigRegex() {
  if (re_) onig_free(static_cast<regex_t*>(re_));
}
OnigRegex::OnigRegex(OnigRegex&& o) noexcept : re_(o.re_) { o.re_ = nullptr; }
OnigRegex& OnigRegex::operator=(OnigRegex&& o) noexcept {
  std::swap(re_, o.re_);
  return *this;
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
    if (r < 0) break;
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
  return r == static_cast<int>(text.size());
}

Pattern Pattern::literal(std::string s) {
  Pattern p;
  p.literal_ = std::move(s);
  return p;
}

Pattern Pattern::regex(const std::string& r, const std::string& item) {
  Pattern p;
  p.regex_ = std::make_shared<OnigRegex>(r, item);
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

}  // namespace qloom::text
