#include "qloom/text/jinja/renderer.h"

namespace qloom::text::jinja {

Renderer::Renderer(const Source& src, Dict globals, Dict context, Budget& budget) : src_(src), budget_(budget) {
  scopes_.push_back(std::move(globals));
  scopes_.push_back(std::move(context));
}

Renderer::Frame::Frame(Renderer& renderer) : r(renderer) {
  r.budget_.step(1);
  if (++r.depth_ > kMaxRenderDepth) {
    --r.depth_;
    eval_fail("template recursion deeper than " + std::to_string(kMaxRenderDepth) +
              " levels (nested macro calls of deeply nested blocks)");
  }
}

void Renderer::emit(std::string& out, const std::string& text) const {
  const size_t limit = budget_.limits().max_output_bytes;
  if (out.size() + text.size() > limit)
    throw EvalError(ErrorKind::kInvalidInput,
                    "template budget exceeded: output over " + std::to_string(limit) +
                        " bytes (limit RenderLimits::max_output_bytes)",
                    "the rendered prompt is larger than any context window; shorten the conversation or fix the "
                    "template");
  budget_.step(static_cast<int64_t>(text.size() / 16));
  out += text;
}

std::string Renderer::render(const Body& body) {
  std::string out;
  if (exec(body, out) != Flow::kNormal)
    throw Error(ErrorKind::kInvalidInput, src_.name, "", "'break' or 'continue' outside a for loop");
  return out;
}

void Renderer::fail_at(size_t pos, const EvalError& err) const {
  throw Error(err.kind, src_.name, src_.where(pos), err.what(), err.remedy);
}

Renderer::Flow Renderer::exec(const Body& body, std::string& out) {
  for (const auto& n : body) {
    Flow f = exec_node(*n, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec_node(const Node& n, std::string& out) {
  try {
    const Frame frame(*this);
    switch (n.kind) {
      case Node::Kind::kText: emit(out, n.text); return Flow::kNormal;
      case Node::Kind::kOutput: emit(out, eval(*n.expr).str()); return Flow::kNormal;
      case Node::Kind::kIf: return exec_if(n, out);
      case Node::Kind::kFor: return exec_for(n, out);
      case Node::Kind::kSet: exec_set(n); return Flow::kNormal;
      case Node::Kind::kSetBlock: {
        std::string captured;
        if (exec(n.body, captured) != Flow::kNormal) eval_fail("'break' or 'continue' inside a set block");
        assign(n.targets[0], Value(captured));
        return Flow::kNormal;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
      case Node::Kind::kMacro: {
        const Node* def = &n;
        assign(n.name, Value::callable(n.name, [this, def](const CallArgs& a) {
          Value caller = std::move(pending_caller_);
          pending_caller_ = Value();
          return call_macro(*def, a, caller);
        }));
        return Flow::kNormal;
      }
      case Node::Kind::kCallBlock: exec_call_block(n, out); return Flow::kNormal;
      case Node::Kind::kGeneration: return exec(n.body, out);
    }
  } catch (const EvalError& err) {
    fail_at(n.pos, err);
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec_if(const Node& n, std::string& out) {
  for (size_t i = 0; i < n.conds.size(); ++i) {
    if (eval(*n.conds[i]).truthy()) return exec(n.bodies[i], out);
  }
  return exec(n.else_body, out);
}

void Renderer::bind_targets(Dict& scope, const std::vector<std::string>& targets, const Value& item) {
  if (targets.size() == 1) {
    scope.set(targets[0], item);
    return;
  }
  List parts = iterate(item);
  if (parts.size() != targets.size()) {
    eval_fail(parts.size() < targets.size()
                  ? "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                        std::to_string(parts.size()) + ")"
                  : "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
}

namespace {

Value loop_object(const List& items, size_t i) {
  const auto n = static_cast<int64_t>(items.size());
  const auto k = static_cast<int64_t>(i);
  Dict loop;
  loop.set("index", Value(k + 1));
  loop.set("index0", Value(k));
  loop.set("revindex", Value(n - k));
  loop.set("revindex0", Value(n - k - 1));
  loop.set("first", Value(i == 0));
  loop.set("last", Value(k == n - 1));
  loop.set("length", Value(n));
  loop.set("depth", Value(1));
  loop.set("depth0", Value(0));
  if (i > 0) loop.set("previtem", items[i - 1]);
  if (k + 1 < n) loop.set("nextitem", items[i + 1]);
  loop.set("cycle", Value::callable("loop.cycle", [k](const CallArgs& a) {
    if (a.args.empty()) eval_fail("no items for cycling given");
    return a.args[static_cast<size_t>(k) % a.args.size()];
  }));
  return Value::dict(std::move(loop));
}

}  // namespace

Renderer::Flow Renderer::exec_for(const Node& n, std::string& out) {
  List all = iterate(eval(*n.expr)), items;
  for (const auto& item : all) {
    budget_.step(1);
    if (!n.cond) {
      items.push_back(item);
      continue;
    }
    scopes_.emplace_back();
    bind_targets(scopes_.back(), n.targets, item);
    bool keep = eval(*n.cond).truthy();
    scopes_.pop_back();
    if (keep) items.push_back(item);
  }
  if (items.empty()) return exec(n.else_body, out);
  for (size_t i = 0; i < items.size(); ++i) {
    budget_.step(1);
    scopes_.emplace_back();
    scopes_.back().set("loop", loop_object(items, i));
    bind_targets(scopes_.back(), n.targets, items[i]);
    Flow f = exec(n.body, out);
    scopes_.pop_back();
    if (f == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Renderer::exec_set(const Node& n) {
  Value v = eval(*n.expr);
  if (!n.attr.empty()) {
    Value ns = lookup(n.targets[0]);
    if (!ns.is_namespace()) eval_fail("cannot assign attribute on non-namespace object");
    ns.as_dict().set(n.attr, std::move(v));
    return;
  }
  if (n.targets.size() == 1) {
    assign(n.targets[0], std::move(v));
    return;
  }
  Dict tmp;
  bind_targets(tmp, n.targets, v);
  for (const auto& [k, x] : tmp.items()) assign(k, x);
}

// {% call m(args) %}body{% endcall %}: m gets `caller`, which renders body
// in the scopes of the call site.
void Renderer::exec_call_block(const Node& n, std::string& out) {
  size_t names = 0;
  for (const Dict& d : scopes_) names += d.size();
  charge_work(names);  // the copy of the call site's scopes, and each caller() below
  std::vector<Dict> site = scopes_;
  const Body* body = &n.body;
  pending_caller_ = Value::callable("caller", [this, site, body, names](const CallArgs&) {
    charge_work(names);
    std::vector<Dict> saved = std::move(scopes_);
    scopes_ = site;
    std::string text;
    exec(*body, text);
    scopes_ = std::move(saved);
    return Value(text);
  });
  if (n.expr->kind != Expr::Kind::kCall) eval_fail("{% call %} needs a macro call");
  emit(out, eval(*n.expr).str());
  pending_caller_ = Value();
}

Value Renderer::call_macro(const Node& n, const CallArgs& a, const Value& caller) {
  const int max_depth = budget_.limits().max_macro_depth;
  if (macro_depth_ >= max_depth)
    eval_fail("macro calls nested more than " + std::to_string(max_depth) +
              " deep (a macro that calls itself without end?); limit RenderLimits::max_macro_depth");
  ++macro_depth_;
  struct Unwind {
    int& d;
    ~Unwind() { --d; }
  } unwind{macro_depth_};
  std::vector<Dict> saved(scopes_.begin() + 2, scopes_.end());
  scopes_.resize(2);
  scopes_.emplace_back();
  List varargs;
  for (size_t i = n.params.size(); i < a.args.size(); ++i) varargs.push_back(a.args[i]);
  Dict kwargs;
  for (const auto& [k, v] : a.kwargs) {
    bool is_param = false;
    for (const auto& p : n.params) is_param = is_param || p == k;
    if (!is_param) kwargs.set(k, v);
  }
  for (size_t i = 0; i < n.params.size(); ++i) {
    const Value* given = a.get(i, n.params[i]);
    Value v = given ? *given
              : n.defaults[i] ? eval(*n.defaults[i])
                              : Value::undefined("parameter '" + n.params[i] + "' was not provided");
    scopes_.back().set(n.params[i], v);
  }
  scopes_.back().set("varargs", Value::list(std::move(varargs)));
  scopes_.back().set("kwargs", Value::dict(std::move(kwargs)));
  if (!caller.is_undefined()) scopes_.back().set("caller", caller);
  std::string out;
  exec(n.body, out);
  scopes_.resize(2);
  scopes_.insert(scopes_.end(), saved.begin(), saved.end());
  return Value(out);
}

Value Renderer::lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    if (const Value* v = it->find(name)) return *v;
  }
  return Value::undefined("'" + name + "' is undefined");
}

}  // namespace qloom::text::jinja
