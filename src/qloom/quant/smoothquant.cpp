#include "qloom/quant/smoothquant.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/model/architecture.h"
#include "qloom/quant/layer_groups.h"

namespace qloom::quant {
namespace {

[[noreturn]] void bad_smoothquant_option(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", key, msg, "SmoothQuant keys: alpha (0..1), scale_clamp_min (> 0)");
}

double number(const nlohmann::json& v, const std::string& key) {
  if (!v.is_number()) bad_smoothquant_option(key, "must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad_smoothquant_option(key, "must be finite");
  return d;
}

}  // namespace

double default_smoothquant_alpha(std::string_view model_type) {
  if (model::find_architecture(model_type) == nullptr) {
    std::string msg = "no SmoothQuant defaults for model_type '";
    msg += model_type;
    msg += "'";
    throw Error(ErrorKind::kUnsupported, "config.json", "model_type", msg);
  }
  if (model_type == "mixtral" || model_type == "qwen2_moe" || model_type == "qwen3_moe") return 0.8;
  return 1.0;
}

SmoothQuantConfig SmoothQuantConfig::from_json(const nlohmann::json& j, std::string_view model_type) {
  SmoothQuantConfig c;
  c.alpha = default_smoothquant_alpha(model_type);
  if (j.is_null()) return c;
  if (!j.is_object()) bad_smoothquant_option("smoothquant", "the SmoothQuant config must be a JSON object");
  for (const auto& [key, v] : j.items()) {
    if (key == "alpha") {
      c.alpha = number(v, key);
      if (c.alpha < 0.0 || c.alpha > 1.0) bad_smoothquant_option(key, "must be in [0, 1]");
    } else if (key == "scale_clamp_min") {
      c.scale_clamp_min = number(v, key);
      if (!(c.scale_clamp_min > 0.0)) bad_smoothquant_option(key, "must be > 0");
    } else {
      std::string msg = "unknown SmoothQuant key '";
      msg += key;
      msg += "'";
      bad_smoothquant_option(key, msg);
    }
  }
  return c;
}

nlohmann::json SmoothQuantConfig::to_json(const model::ModelConfig& config) const {
  nlohmann::json j = nlohmann::json::object();
  j["name"] = "smooth";
  j["alpha"] = alpha;
  j["scale_clamp_min"] = scale_clamp_min;
  j["scaling_layers"] = quark_scaling_layers(config);
  j["model_decoder_layers"] = "model.layers";
  return j;
}

std::vector<float> smoothquant_scales(std::span<const float> act_absmax,
                                      const std::vector<const engine::LinearWeight*>& linears,
                                      const SmoothQuantConfig& config) {
  const int64_t n = static_cast<int64_t>(act_absmax.size());
  if (linears.empty() || n == 0) throw Error(ErrorKind::kUsage, "", "linears", "SmoothQuant needs a group with linears");
  std::vector<double> wmax(static_cast<size_t>(n), 0.0);
  for (const engine::LinearWeight* w : linears) {
    if (w == nullptr || w->in != n)
      throw Error(ErrorKind::kUsage, "", "linears", "a linear's in_features differs from the statistics' width");
    for (int64_t r = 0; r < w->out; ++r) {
      const size_t base = static_cast<size_t>(r * n);
      for (int64_t c = 0; c < n; ++c) {
        const float v = w->type == engine::WeightType::kF32 ? w->f32[base + c] : bf16_to_float(w->bf16[base + c]);
        wmax[static_cast<size_t>(c)] = std::max(wmax[static_cast<size_t>(c)], std::fabs(static_cast<double>(v)));
      }
    }
  }
  std::vector<float> s(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) {
    const double a = act_absmax[static_cast<size_t>(c)];
    if (!std::isfinite(a) || a < 0.0) {
      std::string msg = "activation absmax of channel ";
      msg += std::to_string(c);
      msg += " is negative or not finite";
      throw Error(ErrorKind::kInvalidInput, "", "act_absmax", msg);
    }
    const double w = std::max(wmax[static_cast<size_t>(c)], 1e-5);
    const double v = std::pow(a, config.alpha) / std::pow(w, 1.0 - config.alpha);
    s[static_cast<size_t>(c)] = static_cast<float>(std::max(v, config.scale_clamp_min));
  }
  return s;
}

}  // namespace qloom::quant
