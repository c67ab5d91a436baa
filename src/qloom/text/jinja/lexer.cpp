#include "qloom/text/jinja/lexer.h"

#include <cstring>

#include "qloom/core/error.h"
#include "qloom/text/unicode.h"

namespace qloom::text::jinja {

std::string Source::where(size_t pos) const {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

void syntax_error(const Source& src, size_t pos, const std::string& message) {
  throw Error(ErrorKind::kInvalidInput, src.name, src.where(pos), message,
              "fix the chat template's Jinja syntax");
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
// c is in `set` (strchr alone also "finds" a NUL: the terminator).
bool one_of(const char* set, char c) { return c != '\0' && std::strchr(set, c) != nullptr; }
int hex_digit(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

std::string normalise_newlines(const std::string& text, bool keep_trailing) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      out += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      out += text[i];
    }
  }
  if (!keep_trailing && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(Source& src, const LexOptions& opt) : src_(src), s_(src.text), opt_(opt) {}
  std::vector<Token> run();

 private:
  void emit_text(size_t begin, size_t end, char kind, bool minus, bool plus);
  size_t lex_comment(size_t open, size_t body);
  size_t lex_tag(size_t open, size_t body, char kind);
  size_t close_tag(size_t p, char kind, bool minus, bool plus);
  size_t lex_string(size_t p);
  char32_t hex_escape(size_t q, size_t n) const;
  size_t lex_number(size_t p);
  size_t lex_operator(size_t p, int& depth);
  size_t lex_raw(size_t after);

  Source& src_;
  const std::string& s_;
  LexOptions opt_;
  std::vector<Token> out_;
  bool strip_next_ = false;
};

std::vector<Token> Lexer::run() {
  size_t pos = 0;
  while (pos < s_.size()) {
    size_t open = pos;
    while (open + 1 < s_.size() && !(s_[open] == '{' && one_of("{%#", s_[open + 1]))) ++open;
    if (open + 1 >= s_.size()) {
      emit_text(pos, s_.size(), 0, false, false);
      break;
    }
    char kind = s_[open + 1];
    char mod = open + 2 < s_.size() ? s_[open + 2] : 0;
    bool minus = mod == '-', plus = mod == '+';
    emit_text(pos, open, kind, minus, plus);
    size_t body = open + 2 + ((minus || plus) ? 1 : 0);
    pos = kind == '#' ? lex_comment(open, body) : lex_tag(open, body, kind);
  }
  out_.push_back({Tok::kEof, "", s_.size()});
  return std::move(out_);
}

void Lexer::emit_text(size_t begin, size_t end, char kind, bool minus, bool plus) {
  std::string t = s_.substr(begin, end - begin);
  if (strip_next_) {
    size_t i = 0;
    while (i < t.size() && is_space(t[i])) ++i;
    t.erase(0, i);
    strip_next_ = false;
  }
  if (minus) {
    while (!t.empty() && is_space(t.back())) t.pop_back();
  } else if ((kind == '%' || kind == '#') && opt_.lstrip_blocks && !plus) {
    size_t nl = t.rfind('\n');
    size_t line = nl == std::string::npos ? 0 : nl + 1;
    bool at_line_start = nl != std::string::npos || begin == 0 || s_[begin - 1] == '\n';
    bool blank = line < t.size();
    for (size_t i = line; i < t.size(); ++i) blank = blank && is_space(t[i]);
    if (at_line_start && blank) t.erase(line);
  }
  if (!t.empty()) out_.push_back({Tok::kText, std::move(t), begin});
}

size_t Lexer::lex_comment(size_t open, size_t body) {
  size_t end = s_.find("#}", body);
  if (end == std::string::npos) syntax_error(src_, open, "missing end of comment tag '#}'");
  bool minus = end > body && s_[end - 1] == '-';
  return close_tag(end, '#', minus, false);
}

size_t Lexer::close_tag(size_t p, char kind, bool minus, bool plus) {
  size_t after = p + 2;
  if (minus) {
    strip_next_ = true;
  } else if (kind != '{' && opt_.trim_blocks && !plus && after < s_.size() && s_[after] == '\n') {
    ++after;
  }
  return after;
}

size_t Lexer::lex_tag(size_t open, size_t body, char kind) {
  const char* end = kind == '{' ? "}}" : "%}";
  size_t first = out_.size();
  out_.push_back({kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "", open});
  int depth = 0;
  size_t p = body;
  for (;;) {
    while (p < s_.size() && is_space(s_[p])) ++p;
    if (p >= s_.size())
      syntax_error(src_, open, std::string("unexpected end of template: tag is not closed with '") + end + "'");
    bool mod = (s_[p] == '-' || (s_[p] == '+' && kind == '%')) && s_.compare(p + 1, 2, end) == 0;
    if (depth == 0 && (mod || s_.compare(p, 2, end) == 0)) {
      out_.push_back({kind == '{' ? Tok::kVarEnd : Tok::kBlockEnd, "", p});
      size_t after = close_tag(p + (mod ? 1 : 0), kind, mod && s_[p] == '-', mod && s_[p] == '+');
      bool raw = kind == '%' && out_.size() - first == 3 && out_[first + 1].type == Tok::kName &&
                 out_[first + 1].text == "raw";
      if (!raw) return after;
      out_.resize(first);
      return lex_raw(after);
    }
    char c = s_[p];
    if (c == '"' || c == '\'') {
      p = lex_string(p);
    } else if (is_digit(c)) {
      p = lex_number(p);
    } else if (is_name_start(c)) {
      size_t q = p;
      while (q < s_.size() && is_name_char(s_[q])) ++q;
      out_.push_back({Tok::kName, s_.substr(p, q - p), p});
      p = q;
    } else {
      p = lex_operator(p, depth);
    }
  }
}

// After `{% raw %}`: everything up to `{% endraw %}` is text.
size_t Lexer::lex_raw(size_t after) {
  for (size_t p = s_.find("{%", after); p != std::string::npos; p = s_.find("{%", p + 2)) {
    size_t q = p + 2;
    bool minus = q < s_.size() && s_[q] == '-';
    if (minus || (q < s_.size() && s_[q] == '+')) ++q;
    while (q < s_.size() && is_space(s_[q])) ++q;
    if (s_.compare(q, 6, "endraw") != 0) continue;
    q += 6;
    while (q < s_.size() && is_space(s_[q])) ++q;
    bool close_minus = q < s_.size() && s_[q] == '-';
    if (close_minus) ++q;
    if (s_.compare(q, 2, "%}") != 0) continue;
    emit_text(after, p, '%', minus, false);
    return close_tag(q, '%', close_minus, false);
  }
  syntax_error(src_, after, "missing '{% endraw %}' for '{% raw %}'");
}

// The n hex digits after s_[q] (a \\x, \\u or \\U escape): a Unicode scalar value.
char32_t Lexer::hex_escape(size_t q, size_t n) const {
  char32_t cp = 0;
  for (size_t i = q + 1; i <= q + n; ++i) {
    const int d = hex_digit(s_[i]);
    if (d < 0) syntax_error(src_, q, "bad \\" + std::string(1, s_[q]) + " escape in string: expected hex digits");
    cp = cp * 16 + static_cast<char32_t>(d);
  }
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    syntax_error(src_, q, "\\" + std::string(1, s_[q]) + " escape in string is not a Unicode scalar value");
  return cp;
}

size_t Lexer::lex_string(size_t p) {
  char quote = s_[p];
  std::string v;
  size_t q = p + 1;
  for (; q < s_.size() && s_[q] != quote; ++q) {
    if (s_[q] != '\\' || q + 1 >= s_.size()) {
      v += s_[q];
      continue;
    }
    char e = s_[++q];
    static const char* kFrom = "ntr\\'\"abfv0";
    static const char* kTo = "\n\t\r\\'\"\a\b\f\v";
    const char* hit = one_of(kFrom, e) ? std::strchr(kFrom, e) : nullptr;
    if (e == 'x' || e == 'u' || e == 'U') {
      size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
      if (q + n >= s_.size()) syntax_error(src_, q, "truncated \\" + std::string(1, e) + " escape in string");
      text::append_utf8(v, hex_escape(q, n));
      q += n;
    } else if (e == '0') {
      v += '\0';
    } else if (hit) {
      v += kTo[hit - kFrom];
    } else if (e == '\n') {
      // a backslash-newline continues the line
    } else {
      v += '\\';
      v += e;
    }
  }
  if (q >= s_.size()) syntax_error(src_, p, "unterminated string literal");
  out_.push_back({Tok::kString, std::move(v), p});
  return q + 1;
}

size_t Lexer::lex_number(size_t p) {
  size_t q = p;
  while (q < s_.size() && (is_digit(s_[q]) || s_[q] == '_')) ++q;
  bool is_float = false;
  if (q + 1 < s_.size() && s_[q] == '.' && is_digit(s_[q + 1])) {
    is_float = true;
    for (++q; q < s_.size() && (is_digit(s_[q]) || s_[q] == '_');) ++q;
  }
  if (q < s_.size() && (s_[q] == 'e' || s_[q] == 'E')) {
    size_t r = q + 1;
    if (r < s_.size() && (s_[r] == '+' || s_[r] == '-')) ++r;
    if (r < s_.size() && is_digit(s_[r])) {
      is_float = true;
      for (q = r; q < s_.size() && is_digit(s_[q]);) ++q;
    }
  }
  std::string digits;
  for (size_t i = p; i < q; ++i)
    if (s_[i] != '_') digits += s_[i];
  out_.push_back({is_float ? Tok::kFloat : Tok::kInt, digits, p});
  return q;
}

size_t Lexer::lex_operator(size_t p, int& depth) {
  static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
  for (const char* op : kTwo) {
    if (s_.compare(p, 2, op) == 0) {
      out_.push_back({Tok::kOp, op, p});
      return p + 2;
    }
  }
  char c = s_[p];
  if (!one_of("+-*/%~<>=|.,:()[]{}", c))
    syntax_error(src_, p, std::string("unexpected character '") + c + "'");
  if (c == '(' || c == '[' || c == '{') ++depth;
  if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  out_.push_back({Tok::kOp, std::string(1, c), p});
  return p + 1;
}

}  // namespace

std::vector<Token> tokenize(Source& src, const std::string& text, const LexOptions& options) {
  src.text = normalise_newlines(text, options.keep_trailing_newline);
  return Lexer(src, options).run();
}

}  // namespace qloom::text::jinja
