#include "qloom/quant/gptaq_stage.h"

#include <cmath>

#include "qloom/core/error.h"
#include "qloom/quant/gptaq.h"

namespace qloom::quant {
namespace {

[[noreturn]] void bad_gptaq_key(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", "algo_config.gptaq." + key, msg,
              "keys: name, block_size, damp_percent, alpha, desc_act, static_groups, inside_layer_modules, "
              "model_decoder_layers, damp_retries");
}

class GptaqStage final : public PairedHessianStage {
 public:
  explicit GptaqStage(GptaqConfig c) : PairedHessianStage(Cross::kDelta, c.common), c_(std::move(c)) {}

  std::string name() const override { return "gptaq"; }

  nlohmann::ordered_json algo_config() const override {
    nlohmann::ordered_json j;
    j["name"] = "gptaq";
    j["block_size"] = c_.common.block_size;
    j["damp_percent"] = c_.damp_percent;
    j["alpha"] = c_.alpha;
    j["desc_act"] = c_.common.desc_act;
    j["static_groups"] = c_.common.static_groups;
    j["inside_layer_modules"] = inside_layer_modules_json();
    j["model_decoder_layers"] = c_.common.model_decoder_layers;
    return j;
  }

 protected:
  GptqResult quantize(const QuantTarget& t, const std::vector<float>& w, std::vector<double> H,
                      std::vector<double> D, LayerSession& s) override {
    GptaqOptions o;
    o.damp_percent = c_.damp_percent;
    o.alpha = c_.alpha;
    o.block_size = c_.common.block_size;
    o.act_order = c_.common.desc_act;
    o.static_groups = c_.common.static_groups;
    o.damp_retries = c_.common.damp_retries;
    const engine::LinearWeight& lw = *t.linear.weight;
    return gptaq_quantize(w.data(), static_cast<uint64_t>(lw.out), static_cast<uint64_t>(lw.in), std::move(H),
                          std::move(D), t.spec, t.scale_dtype, t.linear.name + ".weight", s.model_dtype(), o,
                          &s.pool());
  }

 private:
  GptaqConfig c_;
};

}  // namespace

GptaqConfig GptaqConfig::from_json(const nlohmann::json& j) {
  GptaqConfig c;
  if (j.is_null()) return c;
  if (!j.is_object()) bad_gptaq_key("", "the GPTAQ config must be a JSON object");
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (c.common.parse("gptaq", key, v)) continue;
    const bool finite = v.is_number() && std::isfinite(v.get<double>());
    if (key == "name") {
      if (!v.is_string() || v.get<std::string>() != "gptaq") bad_gptaq_key(key, "must be \"gptaq\"");
    } else if (key == "damp_percent") {
      if (!finite || v.get<double>() <= 0) bad_gptaq_key(key, "must be a number > 0");
      c.damp_percent = v.get<double>();
    } else if (key == "alpha") {
      if (!finite || v.get<double>() < 0) bad_gptaq_key(key, "must be a number >= 0");
      c.alpha = v.get<double>();
    } else {
      bad_gptaq_key(key, "unknown GPTAQ config key '" + key + "'");
    }
  }
  c.common.check("gptaq");
  return c;
}

std::unique_ptr<AlgorithmStage> make_gptaq_stage(const GptaqConfig& config) {
  return std::make_unique<GptaqStage>(config);
}

}  // namespace qloom::quant
