#include "qloom/quant/activation_observer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "qloom/core/error.h"

namespace qloom::quant {
float abs_max(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::fmax(m, std::fabs(x[i]));  // fmax drops NaN
  return m;
}

float observed_amax(const std::string& module, const char* what, const float* x, int64_t n) {
  float m = 0.0f;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    finite = finite && std::isfinite(a);
    m = std::fmax(m, a);
  }
  if (!finite)
    throw Error(ErrorKind::kInvalidInput, "", module,
                std::string("calibration: the ") + what + " of " + module +
                    " holds NaN or inf, so no static scale can be computed for it",
                "check the model's weights for NaN / inf (e.g. its norms) or the calibration data; "
                "excluding the layer does not help when an earlier layer produced the values");
  return m;
}

void record_amax(std::map<std::string, float>& table, const std::string& module, float amax) {
  auto [it, inserted] = table.emplace(module, amax);
  if (!inserted) it->second = std::max(it->second, amax);
}

AmaxObservation observe_activation_amax(engine::Model& model, const CalibrationData& data,
                                        const std::set<std::string>& input_modules,
                                        const std::set<std::string>& output_modules,
                                        const CalibrationProgress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  AmaxObservation obs;
  std::mutex mu;  // hooks may run on several threads (MoE experts)
  auto record = [&](std::map<std::string, float>& table, const std::string& module, float amax) {
    std::lock_guard<std::mutex> lock(mu);
    record_amax(table, module, amax);
  };
  engine::ForwardHooks hooks;
  if (!input_modules.empty())
    hooks.linear_input = [&](const engine::LinearSite& s, float* x, int64_t rows, int64_t cols) {
      if (input_modules.count(s.module)) record(obs.input_amax, s.module, observed_amax(s.module, "input", x, rows * cols));
    };
  if (!output_modules.empty())
    hooks.linear_output = [&](const engine::LinearSite& s, float* y, int64_t rows, int64_t cols) {
      if (output_modules.count(s.module)) record(obs.output_amax, s.module, observed_amax(s.module, "output", y, rows * cols));
    };
  const bool lm_head_observed = input_modules.count("lm_head") > 0 || output_modules.count("lm_head") > 0;
  size_t longest = 0;
  for (const auto& s : data.samples) longest = std::max(longest, s.size());
  auto cache = model.new_cache(static_cast<int64_t>(longest));
  for (size_t i = 0; i < data.samples.size(); ++i) {
    cache->clear();
    // lm_head sees every position only when all logits are computed.
    (void)model.forward(data.samples[i], *cache, /*last_only=*/!lm_head_observed, &hooks);
    ++obs.samples;
    obs.tokens += data.samples[i].size();
    if (progress)
      progress(i + 1, data.samples.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  obs.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return obs;
}

}  // namespace qloom::quant
