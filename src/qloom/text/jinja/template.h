// qloom::text::jinja — a small Jinja engine for Hugging Face chat templates,
// configured as transformers configures jinja2 (ImmutableSandboxedEnvironment,
// trim_blocks and lstrip_blocks on, the loopcontrols extension, its own tojson,
// raise_exception and strftime_now, namespace and dict globals).
//
// Supported: {{ }}, {% %}, {# #}, whitespace control (- and +), raw; if/elif/
// else, for (else, loop filter `if`, tuple unpacking, loop.index/index0/
// revindex/revindex0/first/last/length/previtem/nextitem/cycle), break,
// continue, set (names, tuples, ns.attr, block set), macro + call, generation
// (transformers' tag: renders its body); literals (str, int, float, list,
// tuple, dict, true/false/none), and or not, in / not in, is [not] <test>,
// comparisons, + - * / // % ** ~, unary - +, x if c else y, attribute, subscript
// and slice [a:b:c], calls with keyword arguments; the filters and tests in
// runtime.h's lists; str, dict methods (strip split startswith replace...,
// items keys values get).
// Undefined is jinja2's default Undefined: renders as "", is falsy, iterates as
// empty, has length 0, equals only undefined; attribute or item access on it,
// arithmetic with it, calling it and tojson of it raise "'x' is undefined" (or
// the "has no attribute" message of the access that made it).
// Not supported: template inheritance and inclusion (extends, block, include,
// import), filter blocks, recursive loops, autoescape, % string formatting.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include "qloom/text/jinja/ast.h"
#include "qloom/text/jinja/lexer.h"
#include "qloom/text/jinja/value.h"

namespace qloom::text::jinja {

struct RenderOptions {
  // The local time strftime_now formats (transformers: datetime.now()).
  // Empty: the machine's clock and time zone.
  std::function<std::tm()> clock;
};

class Template {
 public:
  // Parses `source`; `name` (a path or label) names the template in errors.
  // Throws qloom::Error kInvalidInput (bad syntax, unknown filter or test,
  // unclosed block) or kUnsupported (a tag outside the subset), with
  // item() = "line:column".
  static Template parse(const std::string& source, const std::string& name, const LexOptions& options = {});

  // Renders with the keys of `context` (a dict) as variables. Throws
  // qloom::Error naming the template and line:column: kInvalidInput for
  // raise_exception (message = the template's message), undefined values used
  // where jinja2 raises, type errors; kUnsupported for unsupported operations.
  std::string render(const Value& context, const RenderOptions& options = {}) const;

  const std::string& name() const { return src_->name; }

 private:
  std::shared_ptr<Source> src_;
  std::shared_ptr<Body> body_;
};

}  // namespace qloom::text::jinja
