// Jinja lexer: template source -> tokens. Text between tags arrives already
// trimmed the way jinja2 trims it: `{%-`/`-%}` (and the same on `{{ }}`, `{# #}`)
// strip all whitespace on that side; trim_blocks drops the first newline after a
// block or comment tag; lstrip_blocks drops the spaces and tabs before a block or
// comment tag that starts its line (`{%+` keeps them, `+%}` keeps the newline).
// Newlines are normalised to "\n" and one trailing newline is dropped
// (keep_trailing_newline=False), as jinja2 does. Comments produce no tokens;
// `{% raw %}...{% endraw %}` produces one text token.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace qloom::text::jinja {

struct LexOptions {
  bool trim_blocks = true;   // transformers sets both
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

enum class Tok { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;  // text, name, decoded string literal, number digits or operator
  size_t pos;        // byte offset in the normalised source
};

struct Source {
  std::string name;  // template name for errors (a path, "chat_template")
  std::string text;  // normalised source

  // "line:column" (1-based; column counts bytes) of a byte offset.
  std::string where(size_t pos) const;
};

// Normalises `text` into `src` and tokenizes it; throws qloom::Error
// (kInvalidInput, file = src.name, item = "line:column") on bad syntax.
std::vector<Token> tokenize(Source& src, const std::string& text, const LexOptions& options);

// Throws the syntax error every stage of the engine reports.
[[noreturn]] void syntax_error(const Source& src, size_t pos, const std::string& message);

}  // namespace qloom::text::jinja
