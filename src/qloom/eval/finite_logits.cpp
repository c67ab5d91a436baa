#include "qloom/eval/finite_logits.h"

#include <cmath>
#include <functional>
#include <mutex>
#include <string>

#include "qloom/core/error.h"

namespace qloom::eval {
namespace {

bool all_finite(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

// `inner` (may be empty) then the check; the first non-finite site wins.
using LinearHook = std::function<void(const engine::LinearSite&, float*, int64_t, int64_t)>;
LinearHook watch(LinearHook inner, const char* side, std::mutex& mu, std::string& where, std::string& module) {
  return [inner = std::move(inner), side, &mu, &where, &module](const engine::LinearSite& s, float* x, int64_t rows,
                                                               int64_t cols) {
    if (inner) inner(s, x, rows, cols);
    if (all_finite(x, rows * cols)) return;
    std::lock_guard<std::mutex> lock(mu);
    if (!where.empty()) return;
    where = std::string("the ") + side + " of " + s.module;
    module = s.module;
  };
}

}  // namespace

std::string locate_non_finite(engine::Model& model, std::span<const int32_t> tokens, engine::KvCache& cache,
                              const engine::ForwardHooks* hooks, std::string* module) {
  engine::ForwardHooks h = hooks ? *hooks : engine::ForwardHooks{};
  std::mutex mu;
  std::string where, mod;
  h.linear_input = watch(h.linear_input, "input", mu, where, mod);
  h.linear_output = watch(h.linear_output, "output", mu, where, mod);
  cache.clear();
  (void)model.forward(tokens, cache, /*last_only=*/false, &h);
  if (module) *module = mod;
  return where;
}

std::vector<float> finite_forward(engine::Model& model, std::span<const int32_t> tokens, engine::KvCache& cache,
                                  const engine::ForwardHooks* hooks, std::string_view metric) {
  cache.clear();
  std::vector<float> logits = model.forward(tokens, cache, /*last_only=*/false, hooks);
  if (all_finite(logits.data(), static_cast<int64_t>(logits.size()))) return logits;
  std::string module;
  const std::string where = locate_non_finite(model, tokens, cache, hooks, &module);
  throw Error(ErrorKind::kInvalidInput, "", module.empty() ? "logits" : module,
              "eval " + std::string(metric) + ": the model's logits are NaN or inf" +
                  (where.empty() ? std::string(" (every linear layer's values were finite; the final norm or the "
                                               "logit processing made them non-finite)")
                                 : "; the values first turn non-finite at " + where),
              "check the checkpoint's weights for NaN / inf (qloom validate --source SRC --quantized DIR); no metric "
              "is reported from non-finite logits");
}

}  // namespace qloom::eval
