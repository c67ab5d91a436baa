#include "qloom/text/jinja/budget.h"

#include "qloom/text/jinja/runtime.h"

namespace qloom::text::jinja {
namespace {

thread_local Budget* t_budget = nullptr;

[[noreturn]] void over_budget(const std::string& what, const std::string& limit) {
  throw EvalError(ErrorKind::kInvalidInput, "template budget exceeded: " + what + " (limit " + limit + ")",
                  "the chat template does far more work than a chat template needs; fix the template, or raise "
                  "jinja::RenderLimits if it is trusted");
}

}  // namespace

Budget::Budget(const RenderLimits& limits) : limits_(limits), previous_(t_budget) { t_budget = this; }

Budget::~Budget() {
  t_budget = previous_;
  for (Value& ns : namespaces_) ns.as_dict().clear();
}

void Budget::step(int64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    over_budget("more than " + std::to_string(limits_.max_steps) + " evaluation steps", "RenderLimits::max_steps");
}

Budget* current_budget() { return t_budget; }

const RenderLimits& current_limits() {
  static const RenderLimits kDefaults;
  return t_budget ? t_budget->limits() : kDefaults;
}

void charge_work(size_t n) {
  if (t_budget) t_budget->step(static_cast<int64_t>(n / 16 + 1));
}

void check_size(size_t bytes, const char* what) {
  const size_t limit = current_limits().max_value_bytes;
  if (bytes > limit)
    over_budget(std::string(what) + (bytes == SIZE_MAX ? " of more than 2^64" : " of " + std::to_string(bytes)) +
                    " bytes",
                "RenderLimits::max_value_bytes = " + std::to_string(limit) + " bytes");
}

void check_value_size(size_t bytes, const char* what) {
  check_size(bytes, what);
  charge_work(bytes);
}

void append_checked(std::string& out, const std::string& piece, const char* what) {
  check_size(out.size() + piece.size(), what);
  charge_work(piece.size());
  out += piece;
}

void fail_overflow(const std::string& what) {
  throw EvalError(ErrorKind::kInvalidInput, "integer overflow: " + what + " does not fit in 64 bits",
                  "qloom's templates compute with 64-bit integers (Python's are unbounded)");
}

}  // namespace qloom::text::jinja
