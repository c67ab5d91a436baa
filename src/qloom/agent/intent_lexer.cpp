#include "qloom/agent/intent_lexer.h"

#include <cctype>
#include <cstdlib>
#include <regex>

#include "qloom/agent/intent_lexicon.h"

namespace qloom::agent::detail {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_clause_punct(char c) { return c == ',' || c == ';' || c == '.' || c == '!' || c == '?'; }

// Curly quotes -> ASCII, en/em dashes -> " - ", non-breaking space -> space.
std::string ascii_punctuation(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const auto c = static_cast<unsigned char>(in[i]);
    if (c == 0xE2 && i + 2 < in.size() && static_cast<unsigned char>(in[i + 1]) == 0x80) {
      const auto d = static_cast<unsigned char>(in[i + 2]);
      if (d == 0x9C || d == 0x9D || d == 0x9E) { s += '"'; i += 2; continue; }
      if (d == 0x98 || d == 0x99) { s += '\''; i += 2; continue; }
      if (d == 0x93 || d == 0x94) { s += " - "; i += 2; continue; }
    }
    if (c == 0xC2 && i + 1 < in.size() && static_cast<unsigned char>(in[i + 1]) == 0xA0) {
      s += ' ';
      ++i;
      continue;
    }
    s += in[i];
  }
  return s;
}

std::string make_norm(std::string_view text) {
  std::string n = lower_ascii(text);
  while (n.size() > 1 && n[0] == '-' && (n[1] == '-' || std::isalpha(static_cast<unsigned char>(n[1])))) n.erase(0, 1);
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

const std::vector<std::pair<std::string, double>>& number_words() {
  static const std::vector<std::pair<std::string, double>> v = {
      {"one", 1}, {"two", 2}, {"three", 3}, {"four", 4}, {"five", 5},
      {"six", 6}, {"seven", 7}, {"eight", 8}, {"nine", 9}, {"ten", 10}};
  return v;
}

class Lexer {
 public:
  std::vector<Token> out;
  size_t clause = 0;

  void word(std::string_view text, bool quoted) {
    if (text.empty()) return;
    Token t;
    t.text = std::string(text);
    t.norm = make_norm(text);
    t.quoted = quoted;
    t.clause = clause;
    static const std::regex num_re(R"(^(\d+\.?\d*|\.\d+)([kK])?(%)?$)");
    std::smatch m;
    const std::string s(text);
    if (rx_match(s, m, num_re)) {
      t.kind = TokKind::kNumber;
      t.num = std::strtod(m[1].str().c_str(), nullptr);
      if (m[2].matched) { t.kilo = true; t.num *= 1000; }
      t.percent = m[3].matched;
      if (t.num > 1e9) t.num = 1e9;  // saturate: no meaningful prompt number is larger
    } else if (t.norm == "%" || t.norm == "percent" || t.norm == "pct") {
      if (!out.empty() && out.back().kind == TokKind::kNumber && out.back().clause == clause) {
        out.back().percent = true;
        if (t.norm == "%") return;
      }
    } else {
      for (const auto& [w, v] : number_words())
        if (t.norm == w) { t.kind = TokKind::kNumber; t.num = v; }
    }
    out.push_back(std::move(t));
  }

  void path_like(const std::string& s, bool quoted) {
    static const std::regex hub_re(R"(^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$)");
    auto has_alpha = [](std::string_view p) {
      for (char c : p)
        if (std::isalpha(static_cast<unsigned char>(c))) return true;
      return false;
    };
    Token t;
    t.text = s;
    t.norm = lower_ascii(s);
    t.quoted = quoted;
    t.clause = clause;
    const bool rooted = s[0] == '/' || s[0] == '~' || s.rfind("./", 0) == 0 || s.rfind("../", 0) == 0;
    if (!rooted && rx_match(s, hub_re)) {
      const size_t slash = s.find('/');
      const std::string org = s.substr(0, slash), name = s.substr(slash + 1);
      if (has_alpha(org) && has_alpha(name) && !is_vocabulary_word(make_norm(org)) &&
          !is_vocabulary_word(make_norm(name))) {
        t.kind = TokKind::kHubId;
        out.push_back(std::move(t));
        return;
      }
      word(org, quoted);
      word(name, quoted);
      return;
    }
    size_t slashes = 0;
    for (char c : s) slashes += c == '/';
    if (rooted || slashes > 1 || s.back() == '/') {
      t.kind = TokKind::kPath;
      out.push_back(std::move(t));
      return;
    }
    size_t b = 0;  // "a/b" where a or b is a vocabulary word: separate words
    for (size_t e = 0; e <= s.size(); ++e)
      if (e == s.size() || s[e] == '/') { word(std::string_view(s).substr(b, e - b), quoted); b = e + 1; }
  }

  // One whitespace-free chunk (or the content of a quote without spaces).
  void chunk(std::string s, bool quoted) {
    bool ends_clause = false;
    while (!s.empty() && (s[0] == '(' || s[0] == '[' || s[0] == '{' || s[0] == '<' || s[0] == '"' || s[0] == '\''))
      s.erase(0, 1);
    while (!s.empty()) {
      const char c = s.back();
      if (is_clause_punct(c)) ends_clause = true;
      if (is_clause_punct(c) || c == ':' || c == ')' || c == ']' || c == '}' || c == '>' || c == '"' || c == '\'')
        s.pop_back();
      else
        break;
    }
    if (s == "-" || s == "--" || s == "but") {
      if (s == "but") word(s, quoted);
      ++clause;
      return;
    }
    if (!s.empty()) emit(s, quoted);
    if (ends_clause) ++clause;
  }

  void emit(std::string s, bool quoted) {
    for (const char* prefix : {"https://huggingface.co/", "http://huggingface.co/", "huggingface.co/",
                               "https://hf.co/", "hf.co/"}) {
      if (lower_ascii(s).rfind(prefix, 0) == 0) {
        s = s.substr(std::string_view(prefix).size());
        while (!s.empty() && s.back() == '/') s.pop_back();
        break;
      }
    }
    static const std::regex key_value(R"(^-{0,2}([A-Za-z][A-Za-z_-]*)=(.+)$)");
    std::smatch kv;
    if (rx_match(s, kv, key_value)) {  // "output_dir=/tmp/x", "--seq_len=512"
      word(kv[1].str(), quoted);
      emit(kv[2].str(), quoted);
      return;
    }
    if (s.find('/') != std::string::npos && s.find("://") == std::string::npos) {
      path_like(s, quoted);
      return;
    }
    // Split at + , ( ) and at '=' after a key.
    std::vector<std::string> parts;
    std::string cur;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '+' || c == ',' || c == '(' || c == ')' || c == '=') {
        if (!cur.empty()) parts.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) parts.push_back(cur);
    static const std::regex unit_re(
        R"(^(\d+)([kK])?[-_]?(tokens?|samples?|sequences?|seqs?|examples?|bits?|docs?|prompts?|shots?|layers?)$)");
    for (const auto& p : parts) {
      std::smatch m;
      if (rx_match(p, m, unit_re)) {
        word(m[1].str() + (m[2].matched ? "k" : ""), quoted);
        word(m[3].str(), quoted);
      } else {
        word(p, quoted);
      }
    }
  }

  void quoted_text(const std::string& inner) {
    bool spaced = false;
    for (char c : inner) spaced = spaced || is_space(c);
    if (!spaced) {
      if (!inner.empty()) emit(inner, true);
      return;
    }
    Token t;
    t.text = inner;
    t.norm = lower_ascii(inner);
    t.quoted = true;
    t.clause = clause;
    const bool rooted = inner[0] == '/' || inner[0] == '~' || inner.rfind("./", 0) == 0 || inner.rfind("../", 0) == 0;
    t.kind = rooted ? TokKind::kPath : TokKind::kQuoted;
    out.push_back(std::move(t));
  }
};

// Index of the quote closing the one at s[i], or npos. An apostrophe closes
// only where followed by whitespace, punctuation or the end.
size_t closing_quote(const std::string& s, size_t i) {
  const char q = s[i];
  for (size_t j = i + 1; j < s.size(); ++j) {
    if (s[j] == '\n') return std::string::npos;
    if (s[j] != q) continue;
    if (q != '\'') return j;
    if (j + 1 == s.size() || is_space(s[j + 1]) || is_clause_punct(s[j + 1]) || s[j + 1] == ':' || s[j + 1] == ')')
      return j;
  }
  return std::string::npos;
}

}  // namespace

std::vector<Token> lex(std::string_view prompt) {
  const std::string s = ascii_punctuation(prompt);
  Lexer lx;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') { ++lx.clause; ++i; continue; }
    if (is_space(c)) { ++i; continue; }
    if (c == '"' || c == '`' || c == '\'') {
      const size_t close = closing_quote(s, i);
      if (close != std::string::npos) {
        lx.quoted_text(s.substr(i + 1, close - i - 1));
        i = close + 1;
        bool ends = false;
        while (i < s.size() && (is_clause_punct(s[i]) || s[i] == ':' || s[i] == ')')) ends = ends || is_clause_punct(s[i++]);
        if (ends) ++lx.clause;
        continue;
      }
    }
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    lx.chunk(s.substr(i, j - i), false);
    i = j;
  }
  return std::move(lx.out);
}

}  // namespace qloom::agent::detail
