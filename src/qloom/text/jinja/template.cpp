#include "qloom/text/jinja/template.h"

#include <chrono>

#include "qloom/text/jinja/budget.h"
#include "qloom/text/jinja/parser.h"
#include "qloom/text/jinja/renderer.h"

namespace qloom::text::jinja {
namespace {

// dict(...) and namespace(...): mappings given positionally, then keywords.
Dict mapping_from(const CallArgs& a, const char* who) {
  Dict d;
  for (const auto& arg : a.args) {
    if (!arg.is_dict()) eval_fail(std::string(who) + "() positional arguments must be mappings");
    for (const auto& [k, v] : arg.as_dict().items()) {
      charge_work(d.size());  // Dict::set's search
      d.set(k, v);
    }
  }
  for (const auto& [k, v] : a.kwargs) d.set(k, v);
  return d;
}

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value range_of(const CallArgs& a) {
  std::vector<int64_t> n;
  for (const auto& v : a.args) {
    if (!v.is_int() && !v.is_bool()) eval_fail("range() arguments must be integers");
    n.push_back(v.as_int());
  }
  if (n.empty() || n.size() > 3) eval_fail("range expected 1 to 3 arguments");
  int64_t start = n.size() == 1 ? 0 : n[0], stop = n.size() == 1 ? n[0] : n[1], step = n.size() == 3 ? n[2] : 1;
  if (step == 0) eval_fail("range() arg 3 must not be zero");
  // Items: ceil((stop - start) / step), in 128 bits so no bound overflows.
  const __int128 span = static_cast<__int128>(stop) - start;
  const __int128 items = (span > 0) != (step > 0) || span == 0 ? 0 : (span + step - (step > 0 ? 1 : -1)) / step;
  if (items > kMaxRange)
    eval_fail("range too big (more than " + std::to_string(kMaxRange) + " items, jinja2's sandbox limit)");
  check_value_size(static_cast<size_t>(items) * sizeof(Value), "a range");
  List out;
  int64_t i = start;
  for (__int128 k = 0; k < items; ++k, i = static_cast<int64_t>(i + static_cast<__int128>(step))) out.emplace_back(i);
  return Value::list(std::move(out));
}

std::tm local_now() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

Value strftime_now(const CallArgs& a, const std::function<std::tm()>& clock) {
  const Value* fmt = a.get(0, "format");
  if (!fmt || !fmt->is_string()) eval_fail("strftime_now() needs a format string");
  std::tm tm = clock ? clock() : local_now();
  check_value_size(256 + fmt->as_string().size() * 8, "the result of strftime_now");
  std::string buf(256 + fmt->as_string().size() * 8, '\0');
  size_t n = std::strftime(buf.data(), buf.size(), fmt->as_string().c_str(), &tm);
  buf.resize(n);
  return buf;
}

Dict make_globals(const RenderOptions& options) {
  Dict g;
  g.set("raise_exception", Value::callable("raise_exception", [](const CallArgs& a) -> Value {
          const Value* msg = a.get(0, "message");
          throw EvalError(ErrorKind::kInvalidInput, msg ? msg->str() : "",
                          "the chat template rejects this conversation (its own message above)");
        }));
  auto clock = options.clock;
  g.set("strftime_now", Value::callable("strftime_now", [clock](const CallArgs& a) { return strftime_now(a, clock); }));
  g.set("namespace", Value::callable("namespace", [](const CallArgs& a) {
          Value ns = Value::dict(mapping_from(a, "namespace"), true);
          if (Budget* b = current_budget()) b->adopt(ns);
          return ns;
        }));
  g.set("dict", Value::callable("dict", [](const CallArgs& a) { return Value::dict(mapping_from(a, "dict")); }));
  g.set("range", Value::callable("range", range_of));
  return g;
}

}  // namespace

Template Template::parse(const std::string& source, const std::string& name, const LexOptions& options) {
  Template t;
  t.src_ = std::make_shared<Source>();
  t.src_->name = name;
  std::vector<Token> tokens = tokenize(*t.src_, source, options);
  t.body_ = std::make_shared<Body>(jinja::parse(*t.src_, std::move(tokens)));
  return t;
}

std::string Template::render(const Value& context, const RenderOptions& options) const {
  if (!context.is_dict())
    throw Error(ErrorKind::kUsage, src_->name, "", "the render context must be a dict, not " + context.type_name());
  Budget budget(options.limits);
  Renderer r(*src_, make_globals(options), context.as_dict(), budget);
  return r.render(*body_);
}

}  // namespace qloom::text::jinja
