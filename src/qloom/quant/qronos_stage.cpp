#include "qloom/quant/qronos_stage.h"

#include <cmath>

#include "qloom/core/error.h"
#include "qloom/quant/qronos.h"

namespace qloom::quant {
namespace {

[[noreturn]] void bad_qronos_key(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", "algo_config.qronos." + key, msg,
              "keys: inside_layer_modules, model_decoder_layers, name, block_size, desc_act, static_groups, alpha, "
              "beta, damp_retries");
}

class QronosStage final : public PairedHessianStage {
 public:
  explicit QronosStage(QronosConfig c) : PairedHessianStage(Cross::kFloat, c.common), c_(std::move(c)) {}

  std::string name() const override { return "qronos"; }

  nlohmann::ordered_json algo_config() const override {
    nlohmann::ordered_json j;
    j["inside_layer_modules"] = inside_layer_modules_json();
    j["model_decoder_layers"] = c_.common.model_decoder_layers;
    j["name"] = "qronos";
    j["block_size"] = c_.common.block_size;
    j["desc_act"] = c_.common.desc_act;
    j["static_groups"] = c_.common.static_groups;
    j["alpha"] = c_.alpha;
    j["beta"] = c_.beta;
    return j;
  }

 protected:
  GptqResult quantize(const QuantTarget& t, const std::vector<float>& w, std::vector<double> H,
                      std::vector<double> G, LayerSession& s) override {
    QronosOptions o;
    o.alpha = c_.alpha;
    o.block_size = c_.common.block_size;
    o.act_order = c_.common.desc_act;
    o.static_groups = c_.common.static_groups;
    o.damp_retries = c_.common.damp_retries;
    const engine::LinearWeight& lw = *t.linear.weight;
    return qronos_quantize(w.data(), static_cast<uint64_t>(lw.out), static_cast<uint64_t>(lw.in), std::move(H),
                           std::move(G), t.spec, t.scale_dtype, t.linear.name + ".weight", s.model_dtype(), o,
                           &s.pool());
  }

 private:
  QronosConfig c_;
};

}  // namespace

QronosConfig QronosConfig::from_json(const nlohmann::json& j) {
  QronosConfig c;
  if (j.is_null()) return c;
  if (!j.is_object()) bad_qronos_key("", "the Qronos config must be a JSON object");
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (c.common.parse("qronos", key, v)) continue;
    const bool positive = v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
    if (key == "name") {
      if (!v.is_string() || v.get<std::string>() != "qronos") bad_qronos_key(key, "must be \"qronos\"");
    } else if (key == "alpha") {
      if (!positive) bad_qronos_key(key, "must be a number > 0");
      c.alpha = v.get<double>();
    } else if (key == "beta") {
      if (!positive) bad_qronos_key(key, "must be a number > 0");
      c.beta = v.get<double>();
    } else {
      bad_qronos_key(key, "unknown Qronos config key '" + key + "'");
    }
  }
  c.common.check("qronos");
  return c;
}

std::unique_ptr<AlgorithmStage> make_qronos_stage(const QronosConfig& config) {
  return std::make_unique<QronosStage>(config);
}

}  // namespace qloom::quant
