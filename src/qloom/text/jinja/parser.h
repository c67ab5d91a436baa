// Jinja parser: tokens -> syntax tree, with jinja2's operator precedence
// (ternary < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary
// < filters/tests < postfix). Syntax errors are qloom::Error kInvalidInput with
// the template's name and line:column; tags outside the supported subset
// (extends, block, include, import, from, with, filter, autoescape, do, recursive
// loops) are kUnsupported.
#pragma once

#include <vector>

#include "qloom/text/jinja/ast.h"
#include "qloom/text/jinja/lexer.h"

namespace qloom::text::jinja {

Body parse(const Source& src, std::vector<Token> tokens);

}  // namespace qloom::text::jinja
