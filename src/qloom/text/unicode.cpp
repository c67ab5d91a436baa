#include "qloom/text/unicode.h"

#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utypes.h>

#include <vector>

#include "qloom/core/error.h"
#include "qloom/text/onig_regex.h"

namespace qloom::text {

size_t utf8_len(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

char32_t next_codepoint(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t n = utf8_len(b0);
  if (i + n > s.size()) n = 1;
  char32_t cp;
  switch (n) {
    case 2: cp = b0 & 0x1F; break;
    case 3: cp = b0 & 0x0F; break;
    case 4: cp = b0 & 0x07; break;
    default: ++i; return b0;
  }
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t count_codepoints(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool is_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

namespace {
bool matches_class(const OnigRegex& re, char32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return re.matches_whole(s);
}
}  // namespace

bool is_numeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  static const OnigRegex re("\\p{N}");
  return matches_class(re, cp);
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') ||
                        (cp >= 'A' && cp <= 'Z') || cp == '_';
  static const OnigRegex re(kRustWordClass);
  return matches_class(re, cp);
}

namespace {
// Length of the valid UTF-8 sequence at s[i], or 0 and in `bad` the length of
// the maximal invalid subpart (at least 1).
size_t valid_seq_len(std::string_view s, size_t i, size_t& bad) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  bad = 1;
  if (c < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) { bad = k; return 0; }
    const unsigned char x = b(i + k);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) { bad = k; return 0; }
  }
  return need + 1;
}
}  // namespace

bool is_valid_utf8(std::string_view s) {
  size_t bad = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = valid_seq_len(s, i, bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string lossy_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t bad = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = valid_seq_len(s, i, bad);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += bad;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

namespace {
struct ByteTables {
  std::array<std::string, 256> to_char;
  std::vector<int> to_byte = std::vector<int>(512, -1);  // code points < 512 only
  ByteTables() {
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      append_utf8(to_char[b], cp);
      to_byte[cp] = b;
    }
  }
};
const ByteTables& byte_tables() {
  static const ByteTables t;
  return t;
}
}  // namespace

const std::array<std::string, 256>& byte_level_chars() { return byte_tables().to_char; }

int byte_level_byte(char32_t cp) {
  return cp < 512 ? byte_tables().to_byte[cp] : -1;
}

// ---- ICU (Debian libicu-dev, linked through pkg-config icu-uc): Unicode
// normalization forms and lowercasing, as the Rust unicode-normalization
// crate HF tokenizers uses computes them.
namespace {
using UChar16 = char16_t;
static_assert(sizeof(UChar) == sizeof(UChar16));

const UNormalizer2* normalizer(NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* n = nullptr;
  switch (form) {
    case NormalForm::kNFC: n = unorm2_getNFCInstance(&status); break;
    case NormalForm::kNFD: n = unorm2_getNFDInstance(&status); break;
    case NormalForm::kNFKC: n = unorm2_getNFKCInstance(&status); break;
    case NormalForm::kNFKD: n = unorm2_getNFKDInstance(&status); break;
  }
  if (U_FAILURE(status) || n == nullptr)
    throw Error(ErrorKind::kInternal, "", "normalizer",
                std::string("ICU has no normalizer instance: ") + u_errorName(status),
                "check the ICU data of the libicu package");
  return n;
}

std::u16string to_utf16(std::string_view s) {
  std::u16string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = next_codepoint(s, i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out += static_cast<char16_t>(0xD800 + (cp >> 10));
      out += static_cast<char16_t>(0xDC00 + (cp & 0x3FF));
    } else {
      out += static_cast<char16_t>(cp);
    }
  }
  return out;
}

std::string to_utf8(const std::u16string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char32_t cp = s[i];
    if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < s.size()) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (s[++i] - 0xDC00);
    }
    append_utf8(out, cp);
  }
  return out;
}

// Calls f(dest, cap, status) growing dest until it fits.
template <class F>
std::u16string icu_call(size_t hint, F&& f) {
  std::u16string dest(hint + 16, u'\0');
  UErrorCode status = U_ZERO_ERROR;
  int32_t n = f(reinterpret_cast<UChar*>(dest.data()), static_cast<int32_t>(dest.size()), &status);
  if (status == U_BUFFER_OVERFLOW_ERROR) {
    dest.assign(static_cast<size_t>(n) + 1, u'\0');
    status = U_ZERO_ERROR;
    n = f(reinterpret_cast<UChar*>(dest.data()), static_cast<int32_t>(dest.size()), &status);
  }
  if (U_FAILURE(status)) {
    throw Error(ErrorKind::kInternal, "", "normalizer", std::string("ICU failed: ") + u_errorName(status));
  }
  dest.resize(static_cast<size_t>(n));
  return dest;
}
}  // namespace

std::string unicode_normalize(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(s);
  const UNormalizer2* norm = normalizer(form);
  const std::u16string src = to_utf16(s);
  return to_utf8(icu_call(src.size() * 2, [&](UChar* d, int32_t cap, UErrorCode* st) {
    return unorm2_normalize(norm, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()), d,
                            cap, st);
  }));
}

std::string unicode_lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t k = 0; k < s.size();) {
    const size_t start = k;
    const char32_t cp = next_codepoint(s, k);
    if (cp < 0x80) {
      out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
      continue;
    }
    const std::u16string src = to_utf16(s.substr(start, k - start));
    // One code point at a time: no final-sigma or other context rules.
    out += to_utf8(icu_call(8, [&](UChar* d, int32_t cap, UErrorCode* st) {
      return u_strToLower(d, cap, reinterpret_cast<const UChar*>(src.data()), static_cast<int32_t>(src.size()), "", st);
    }));
  }
  return out;
}

}  // namespace qloom::text
