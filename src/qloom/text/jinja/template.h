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

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include "qloom/text/jinja/ast.h"
#include "qloom/text/jinja/lexer.h"
#include "qloom/text/jinja/value.h"

namespace qloom::text::jinja {

// What one render may spend. A template comes with the model or with a
// request, so it is untrusted: exceeding any limit stops the render with a
// qloom::Error kInvalidInput naming the template line and the limit.
struct RenderLimits {
  // Work: one step per expression evaluated, tag executed and loop iteration,
  // plus one per 16 bytes (or list items) a builtin reads, copies or creates.
  // 5M steps take about half a second on one core; HF chat templates need
  // well under 100k for a long conversation.
  int64_t max_steps = 5'000'000;
  // The rendered text. 16 MiB is ~4M tokens, beyond any context window.
  size_t max_output_bytes = size_t(16) << 20;
  // Any one string or list the template creates (a list counts the memory of
  // its items, sizeof(Value) each; its strings are shared, not copied).
  size_t max_value_bytes = size_t(16) << 20;
  // Macro calls in progress (recursion), and nesting of lists / dicts.
  int max_macro_depth = 100;
  int max_value_depth = 128;
};

struct RenderOptions {
  // The local time strftime_now formats (transformers: datetime.now()).
  // Empty: the machine's clock and time zone.
  std::function<std::tm()> clock;
  RenderLimits limits;
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
  // where jinja2 raises, type errors, integer overflow, a RenderLimits limit
  // exceeded; kUnsupported for unsupported operations.
  std::string render(const Value& context, const RenderOptions& options = {}) const;

  const std::string& name() const { return src_->name; }

 private:
  std::shared_ptr<Source> src_;
  std::shared_ptr<Body> body_;
};

}  // namespace qloom::text::jinja
