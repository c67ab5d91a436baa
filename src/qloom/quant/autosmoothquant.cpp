#include "qloom/quant/autosmoothquant.h"

#include <algorithm>
#include <cmath>

#include "qloom/core/error.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::quant {

ScaleLoss parse_scale_loss(const nlohmann::json& v, const std::string& item) {
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s == "MSE") return ScaleLoss::kMse;
  if (s == "MAE") return ScaleLoss::kMae;
  if (s == "RMSE") return ScaleLoss::kRmse;
  throw Error(ErrorKind::kUsage, "", item, "must be \"MSE\", \"MAE\" or \"RMSE\" (got " + v.dump() + ")",
              "Quark's compute_scale_loss values, upper case");
}

std::string scale_loss_name(ScaleLoss l) {
  switch (l) {
    case ScaleLoss::kMse: return "MSE";
    case ScaleLoss::kMae: return "MAE";
    case ScaleLoss::kRmse: return "RMSE";
  }
  return "MSE";
}

double scale_loss_power(ScaleLoss l) {
  switch (l) {
    case ScaleLoss::kMse: return 2.0;
    case ScaleLoss::kMae: return 1.0;
    case ScaleLoss::kRmse: return 0.5;
  }
  return 2.0;
}

ScaleLoss default_scale_loss(std::string_view model_type) {
  for (const char* t : {"llama", "hunyuan_v1_dense", "llama4", "mixtral", "deepseek_v2", "deepseek_v3",
                        "granitemoehybrid", "qwen3_5_moe"})
    if (model_type == t) return ScaleLoss::kMae;
  return ScaleLoss::kMse;
}

std::vector<float> autosmooth_scales(std::span<const float> x_max, double ratio) {
  if (x_max.empty())
    throw Error(ErrorKind::kInvalidInput, "", "x_max", "AutoSmoothQuant needs the input's per-channel max");
  std::vector<double> s(x_max.size());
  for (size_t j = 0; j < x_max.size(); ++j) {
    const double x = x_max[j];
    if (!std::isfinite(x) || x < 0.0)
      throw Error(ErrorKind::kInvalidInput, "", "x_max", "channel " + std::to_string(j) + " has max |x| " +
                                                             std::to_string(x) + ": not a finite value >= 0",
                  "check the calibration inputs for NaN / inf");
    s[j] = std::max(std::pow(x, ratio), 1e-4);
  }
  const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  const double norm = std::sqrt(*hi * *lo);
  std::vector<float> out(s.size());
  for (size_t j = 0; j < s.size(); ++j) out[j] = static_cast<float>(s[j] / norm);
  return out;
}

StaticQParams autosmooth_static_qparams(std::span<const float> x_max, std::span<const float> s, const QuantSpec& spec,
                                        DType scale_dtype, DType model_dtype) {
  float amax = 0.0f;
  for (size_t j = 0; j < x_max.size() && j < s.size(); ++j) amax = std::max(amax, x_max[j] / s[j]);
  StaticQParams q;
  q.scale = static_scale_from_amax(amax, spec, scale_dtype, model_dtype);
  return q;
}

void smooth_quantize_input(float* x, int64_t rows, int64_t cols, std::span<const float> s,
                           const SmoothInputQuant& q) {
  if (q.spec == nullptr) return;
  if (static_cast<int64_t>(s.size()) != cols)
    throw Error(ErrorKind::kInternal, "", "scales", "smoothing scales do not match the input width");
  const size_t n = static_cast<size_t>(rows * cols);
  for (size_t i = 0; i < n; ++i) x[i] /= s[i % static_cast<size_t>(cols)];
  fake_quantize_activation(x, rows, cols, *q.spec, q.qparams);
  for (size_t i = 0; i < n; ++i) x[i] *= s[i % static_cast<size_t>(cols)];
}

double scale_loss_sum(const float* y, const float* ref, size_t n, double p) {
  double acc = 0.0;
  if (p == 2.0) {
    for (size_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(y[i]) - ref[i];
      acc += d * d;
    }
  } else if (p == 1.0) {
    for (size_t i = 0; i < n; ++i) acc += std::fabs(static_cast<double>(y[i]) - ref[i]);
  } else {
    for (size_t i = 0; i < n; ++i) acc += std::pow(std::fabs(static_cast<double>(y[i]) - ref[i]), p);
  }
  return acc;
}

}  // namespace qloom::quant
