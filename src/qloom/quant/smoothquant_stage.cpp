#include "qloom/quant/smoothquant_stage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/quant/activation_observer.h"
#include "qloom/quant/layer_fold.h"

namespace qloom::quant {
namespace {

constexpr const char* kSmoothquantPrefix = "algo_config.smoothquant.";

[[noreturn]] void bad_smoothquant_key(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", kSmoothquantPrefix + key, msg,
              "keys: name (\"smooth\"), alpha (0..1), scale_clamp_min (> 0), scaling_layers, model_decoder_layers");
}

struct ChannelMax {
  std::vector<float> absmax;
  int64_t tokens = 0;
};

class SmoothQuantStage final : public AlgorithmStage {
 public:
  explicit SmoothQuantStage(SmoothQuantStageConfig c) : c_(std::move(c)) {}

  std::string name() const override { return "smoothquant"; }

  nlohmann::ordered_json algo_config() const override {
    nlohmann::ordered_json j;
    j["name"] = "smooth";
    const double a = c_.params.alpha;
    if (a == std::floor(a)) j["alpha"] = static_cast<int64_t>(a);
    else j["alpha"] = a;
    j["scale_clamp_min"] = c_.params.scale_clamp_min;
    j["scaling_layers"] = record_.to_json();
    j["model_decoder_layers"] = c_.model_decoder_layers;
    return j;
  }

  void start(const model::ModelConfig& config) override {
    check_scaling_layers(c_.scaling_layers, config, std::string(kSmoothquantPrefix) + "scaling_layers");
  }

  void process_layer(LayerSession& s) override;

  void finish(PipelineSummary& summary) override { unscaled_.report("SmoothQuant", summary.warnings); }

 private:
  bool selected(const ScalingLayerEntry& e) const { return group_selected(c_.scaling_layers, e); }

  SmoothQuantStageConfig c_;
  ScalingLayersRecord record_;
  UnscaledGroups unscaled_;
};

void SmoothQuantStage::process_layer(LayerSession& s) {
  engine::LayerRunner& r = s.runner();
  const int layer = static_cast<int>(s.layer());
  std::vector<std::pair<ScalingGroup, ScalingLayerEntry>> todo;
  std::map<std::string, ChannelMax> stats;  // by input site
  for (ScalingGroup& g : layer_scaling_groups(r.config(), layer)) {
    ScalingLayerEntry e = scaling_entry_of(g, layer);
    if (!selected(e)) continue;
    if (const std::string why = fold_blocker(s, g); !why.empty()) {
      unscaled_.note(e, why);
      continue;
    }
    stats[g.input_site].absmax.assign(static_cast<size_t>(g.channels), 0.0f);
    todo.emplace_back(std::move(g), std::move(e));
  }
  if (todo.empty()) return;
  engine::ForwardHooks hooks;
  hooks.linear_input = [&](const engine::LinearSite& site, float* x, int64_t rows, int64_t cols) {
    auto it = stats.find(site.module);
    if (it == stats.end()) return;
    ChannelMax& m = it->second;
    if (static_cast<size_t>(cols) != m.absmax.size())
      throw Error(ErrorKind::kInternal, "", site.module, "the group's input width differs from its channel count");
    (void)observed_amax(site.module, "input", x, rows * cols);  // NaN / inf: an error naming it
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t j = 0; j < cols; ++j) m.absmax[static_cast<size_t>(j)] = std::max(m.absmax[static_cast<size_t>(j)], std::fabs(x[t * cols + j]));
    m.tokens += rows;
  };
  s.run(hooks, engine::LayerPart::kFull);

  std::vector<std::string> unrouted;
  for (const auto& [g, e] : todo) {
    const ChannelMax& m = stats.at(g.input_site);
    if (m.tokens == 0) {
      ++s.summary().unscaled_groups;
      unrouted.push_back(g.input_site);
      continue;
    }
    std::vector<const engine::LinearWeight*> ws;
    for (const std::string& l : g.linears) ws.push_back(&r.linear(l));
    const std::vector<float> scales = smoothquant_scales(m.absmax, ws, c_.params);
    fold_into_layer(s, g, scales);
    ++s.summary().scaled_groups;
    record_.add(e);
  }
  if (!unrouted.empty()) {
    std::string msg = "SmoothQuant: " + std::to_string(unrouted.size()) + " scaling group(s) of layer " +
                      std::to_string(layer) +
                      " received no calibration token (MoE experts no sample was routed to) and were left unscaled: ";
    for (size_t i = 0; i < unrouted.size() && i < 4; ++i) msg += (i ? ", " : "") + unrouted[i];
    if (unrouted.size() > 4) msg += ", ...";
    s.warn(msg);
  }
}

}  // namespace

SmoothQuantStageConfig SmoothQuantStageConfig::from_json(const nlohmann::json& j, std::string_view model_type) {
  SmoothQuantStageConfig c;
  nlohmann::json params = nlohmann::json::object();
  if (!j.is_null() && !j.is_object()) bad_smoothquant_key("", "the SmoothQuant config must be a JSON object");
  if (j.is_object()) {
    for (const auto& [key, v] : j.items()) {
      if (v.is_null()) continue;
      if (key == "name") {
        if (!v.is_string() || v.get<std::string>() != "smooth") bad_smoothquant_key(key, "must be \"smooth\" (Quark's name)");
      } else if (key == "alpha" || key == "scale_clamp_min") {
        params[key] = v;
      } else if (key == "scaling_layers") {
        c.scaling_layers = parse_scaling_layers(v, kSmoothquantPrefix + key);
      } else if (key == "model_decoder_layers") {
        c.model_decoder_layers = parse_model_decoder_layers(v, kSmoothquantPrefix + key);
      } else {
        bad_smoothquant_key(key, "unknown SmoothQuant config key '" + key + "'");
      }
    }
  }
  try {
    c.params = SmoothQuantConfig::from_json(params, model_type);
  } catch (const Error& e) {  // name the key as the stage's config does
    if (e.kind() != ErrorKind::kUsage) throw;
    bad_smoothquant_key(e.item(), e.message());
  }
  return c;
}

std::unique_ptr<AlgorithmStage> make_smoothquant_stage(const SmoothQuantStageConfig& config) {
  return std::make_unique<SmoothQuantStage>(config);
}

}  // namespace qloom::quant
