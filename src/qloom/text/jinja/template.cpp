#include "qloom/text/jinja/template.h"

#include <chrono>

#include "qloom/text/jinja/parser.h"
#include "qloom/text/jinja/renderer.h"

namespace qloom::text::jinja {
namespace {

// dict(...) and namespace(...): mappings given positionally, then keywords.
Dict mapping_from(const CallArgs& a, const char* who) {
  Dict d;
  for (const auto& arg : a.args) {
    if (!arg.is_dict()) eval_fail(std::string(who) + "() positional arguments must be mappings");
    for (const auto& [k, v] : arg.as_dict().items()) d.set(k, v);
  }
  for (const auto& [k, v] : a.kwargs) d.set(k, v);
  return d;
}

Value range_of(const CallArgs& a) {
  std::vector<int64_t> n;
  for (const auto& v : a.args) {
    if (!v.is_int() && !v.is_bool()) eval_fail("range() arguments must be integers");
    n.push_back(v.as_int());
  }
  if (n.empty() || n.size() > 3) eval_fail("range expected 1 to 3 arguments");
  int64_t start = n.size() == 1 ? 0 : n[0], stop = n.size() == 1 ? n[0] : n[1], step = n.size() == 3 ? n[2] : 1;
  if (step == 0) eval_fail("range() arg 3 must not be zero");
  if ((stop - start) / step > 100000) eval_fail("range too big (more than 100000 items)");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
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
          return Value::dict(mapping_from(a, "namespace"), true);
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
  Renderer r(*src_, make_globals(options), context.as_dict());
  return r.render(*body_);
}

}  // namespace qloom::text::jinja
