// Internal: walks a parsed template. Scopes follow jinja2: the globals, then the
// render context (where top-level `set` writes), then one scope per for-loop
// iteration or macro call, so a `set` inside a loop body is gone after that
// iteration while a namespace() attribute set there stays (the namespace object
// is shared).
#pragma once

#include <string>
#include <vector>

#include "qloom/text/jinja/ast.h"
#include "qloom/text/jinja/budget.h"
#include "qloom/text/jinja/lexer.h"
#include "qloom/text/jinja/runtime.h"

namespace qloom::text::jinja {

class Renderer {
 public:
  // `budget` is the render's (installed on this thread for its lifetime).
  Renderer(const Source& src, Dict globals, Dict context, Budget& budget);
  std::string render(const Body& body);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body, std::string& out);
  Flow exec_node(const Node& n, std::string& out);
  Flow exec_if(const Node& n, std::string& out);
  Flow exec_for(const Node& n, std::string& out);
  void exec_set(const Node& n);
  void exec_call_block(const Node& n, std::string& out);
  Value call_macro(const Node& n, const CallArgs& args, const Value& caller);
  void bind_targets(Dict& scope, const std::vector<std::string>& targets, const Value& item);

  Value eval(const Expr& e);
  Value eval_expr(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_call(const Expr& e);
  CallArgs eval_args(const Expr& e, size_t first);
  Value lookup(const std::string& name) const;
  void assign(const std::string& name, Value v) { scopes_.back().set(name, std::move(v)); }
  [[noreturn]] void fail_at(size_t pos, const EvalError& err) const;
  // One step of work and one level of recursion (eval / exec) for its
  // lifetime: bounds the time and the stack a render takes.
  struct Frame {
    Renderer& r;
    explicit Frame(Renderer& renderer);
    ~Frame() { --r.depth_; }
  };
  void emit(std::string& out, const std::string& text) const;

  const Source& src_;
  Budget& budget_;
  std::vector<Dict> scopes_;
  Value pending_caller_;
  int macro_depth_ = 0;  // macro calls in progress (RenderLimits::max_macro_depth)
  int depth_ = 0;        // eval / exec calls in progress (kMaxRenderDepth)
};

// Recursion of the renderer: the parser bounds a template's nesting to 256, and
// macros nest max_macro_depth deep; this bounds their product. Measured: the
// 3000 levels fit in 1 MiB of stack (release build), a thread has 8 MiB.
constexpr int kMaxRenderDepth = 3000;

// Python's binary operators on values: + - * / // % ** ~.
Value binary_op(const std::string& op, const Value& a, const Value& b);
// Python's `item in container`.
bool contains(const Value& container, const Value& item);

}  // namespace qloom::text::jinja
