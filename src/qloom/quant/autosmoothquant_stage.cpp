#include "qloom/quant/autosmoothquant_stage.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/quant/activation_observer.h"
#include "qloom/quant/awq.h"
#include "qloom/quant/layer_fold.h"
#include "qloom/quant/phase_timer.h"
#include "qloom/quant/quantize_ref.h"

namespace qloom::quant {
namespace {

constexpr const char* kAutosmoothquantPrefix = "algo_config.autosmoothquant.";

[[noreturn]] void bad_autosmoothquant_key(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", kAutosmoothquantPrefix + key, msg,
              "keys: name, scaling_layers, model_decoder_layers, compute_scale_loss; qloom only: n_grid");
}

// A group's statistic at its input site (the reference pass).
struct InputMax {
  std::vector<float> x_max;  // max |x| per channel
  int64_t tokens = 0;
};

// The candidates in the layer's slots (prepacked) for the guard's lifetime;
// the original weights are put back when it ends, also on an exception.
class SwappedLinears {
 public:
  SwappedLinears(engine::LayerRunner& r, const AwqCandidates& cands) {
    for (const auto& [name, w] : cands) {
      engine::LinearWeight& slot = r.linear(name);
      saved_.emplace_back(&slot, std::move(slot));
      slot = w;
      engine::prepack(slot);
    }
  }
  ~SwappedLinears() {
    for (auto& [slot, orig] : saved_) *slot = std::move(orig);
  }
  SwappedLinears(const SwappedLinears&) = delete;
  SwappedLinears& operator=(const SwappedLinears&) = delete;

 private:
  std::vector<std::pair<engine::LinearWeight*, engine::LinearWeight>> saved_;
};

// One inspected output of the reference pass, all samples in order.
struct RefOutput {
  std::vector<float> values;
  std::vector<size_t> offsets;  // samples + 1
};

class AutoSmoothQuantStage final : public AlgorithmStage {
 public:
  explicit AutoSmoothQuantStage(AutoSmoothQuantStageConfig c) : c_(std::move(c)) {}

  std::string name() const override { return "autosmoothquant"; }

  nlohmann::ordered_json algo_config() const override {
    nlohmann::ordered_json j;
    j["name"] = "autosmoothquant";
    j["scaling_layers"] = record_.to_json();
    j["model_decoder_layers"] = c_.model_decoder_layers;
    j["compute_scale_loss"] = scale_loss_name(c_.compute_scale_loss);
    return j;
  }

  void start(const model::ModelConfig& config) override {
    check_scaling_layers(c_.scaling_layers, config, std::string(kAutosmoothquantPrefix) + "scaling_layers");
  }

  void process_layer(LayerSession& s) override;

  void finish(PipelineSummary& summary) override { unscaled_.report("AutoSmoothQuant", summary.warnings); }

 private:
  bool selected(const ScalingGroup& g, const ScalingLayerEntry& e) const;
  // Per group (in order), its input's max |x| (and the reference outputs in ref_).
  std::vector<InputMax> reference_pass(LayerSession& s, const std::vector<SearchGroup>& groups);
  void search(LayerSession& s, SearchGroup& sg, const InputMax& in);
  double candidate_loss(LayerSession& s, const SearchGroup& sg, const AwqCandidates& cands,
                        std::span<const float> scales, const SmoothInputQuant& q);

  AutoSmoothQuantStageConfig c_;
  ScalingLayersRecord record_;
  UnscaledGroups unscaled_;
  std::vector<std::vector<float>> mid_;   // attention-half output per sample (feed-forward groups)
  std::map<std::string, RefOutput> ref_;  // reference output per inspected output module
};

// Quark's order: every group searched on the unsmoothed layer from one
// reference pass, then all scales folded in forward order.
void AutoSmoothQuantStage::process_layer(LayerSession& s) {
  std::vector<SearchGroup> groups = plan_search_groups(
      s, [this](const ScalingGroup& g, const ScalingLayerEntry& e) { return selected(g, e); }, unscaled_);
  if (groups.empty()) return;
  const std::vector<InputMax> stats = reference_pass(s, groups);
  for (size_t i = 0; i < groups.size(); ++i) search(s, groups[i], stats[i]);
  std::vector<std::vector<float>>().swap(mid_);
  ref_.clear();
  fold_search_groups(s, "AutoSmoothQuant", groups, record_);
}

bool AutoSmoothQuantStage::selected(const ScalingGroup& g, const ScalingLayerEntry& e) const {
  if (!c_.scaling_layers.empty()) return group_selected(c_.scaling_layers, e);
  return c_.default_kinds.empty() ||
         std::find(c_.default_kinds.begin(), c_.default_kinds.end(), g.kind) != c_.default_kinds.end();
}

std::vector<InputMax> AutoSmoothQuantStage::reference_pass(LayerSession& s, const std::vector<SearchGroup>& groups) {
  std::vector<InputMax> stats(groups.size());
  std::map<std::string, std::vector<size_t>> at_input;
  bool any_ff = false;
  for (size_t i = 0; i < groups.size(); ++i) {
    at_input[groups[i].g.input_site].push_back(i);
    stats[i].x_max.assign(static_cast<size_t>(groups[i].g.channels), 0.0f);
    ref_[groups[i].out_module];
    any_ff = any_ff || groups[i].ff;
  }
  engine::ForwardHooks hooks;
  hooks.linear_input = [&](const engine::LinearSite& site, float* x, int64_t rows, int64_t cols) {
    const auto it = at_input.find(site.module);
    if (it == at_input.end()) return;
    (void)observed_amax(site.module, "input", x, rows * cols);  // NaN / inf: an error naming it
    for (size_t g : it->second) {
      if (cols != groups[g].g.channels)
        throw Error(ErrorKind::kInternal, "", site.module, "input width differs from the scaling group's channels");
      std::vector<float>& m = stats[g].x_max;
      for (int64_t t = 0; t < rows; ++t)
        for (int64_t j = 0; j < cols; ++j) m[static_cast<size_t>(j)] = std::max(m[static_cast<size_t>(j)], std::fabs(x[t * cols + j]));
      stats[g].tokens += rows;
    }
  };
  hooks.linear_output = [&](const engine::LinearSite& site, float* y, int64_t rows, int64_t cols) {
    if (const auto it = ref_.find(site.module); it != ref_.end())
      it->second.values.insert(it->second.values.end(), y, y + rows * cols);
  };
  PhaseTimer t(s.summary(), "autosmoothquant.reference");
  if (any_ff) mid_ = s.inputs();
  for (size_t i = 0; i < s.samples(); ++i) {
    for (auto& [m, ro] : ref_) ro.offsets.push_back(ro.values.size());
    if (!any_ff) {
      s.run_sample(i, hooks, engine::LayerPart::kFull);
      continue;
    }
    s.run_state(i, mid_[i], hooks, engine::LayerPart::kFirstHalf);   // in place
    s.run_state(i, mid_[i], hooks, engine::LayerPart::kFeedForward);  // mid_[i] unchanged
  }
  for (auto& [m, ro] : ref_) ro.offsets.push_back(ro.values.size());
  return stats;
}

void AutoSmoothQuantStage::search(LayerSession& s, SearchGroup& sg, const InputMax& in) {
  if (in.tokens == 0) return;  // no calibration token reached it (an MoE expert)
  engine::LayerRunner& r = s.runner();
  std::map<std::string, QuantTarget> targets;
  for (const QuantTarget& t : s.pending()) targets.emplace(t.linear.name, t);
  // Quark quantizes the shared input with the last linear's input quantizer.
  const QuantTarget& last = targets.at(sg.g.linears.back());  // fold_blocker: every reader is pending
  AwqQuantOptions qo;
  qo.scale_dtype = targets.at(sg.g.linears.front()).scale_dtype;
  qo.model_dtype = s.model_dtype();
  qo.threads = static_cast<unsigned>(s.pool().size());

  PhaseTimer timer(s.summary(), "autosmoothquant.grid." + sg.g.kind);
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < c_.n_grid; ++i) {
    std::vector<float> sv = autosmooth_scales(in.x_max, static_cast<double>(i) / c_.n_grid);
    AwqCandidates cands;
    for (const std::string& l : sg.g.linears) {
      const QuantTarget& t = targets.at(l);
      cands.emplace(l, awq_candidate(r.linear(l), t.spec, sv, qo, l));
    }
    SmoothInputQuant q;
    if (last.input) {
      q.spec = &*last.input;
      if (!last.input->is_dynamic)
        q.qparams = autosmooth_static_qparams(in.x_max, sv, *last.input,
                                              quark_scale_dtype(*last.input, s.model_dtype()), s.model_dtype());
    }
    const double loss = candidate_loss(s, sg, cands, sv, q);
    if (std::isfinite(loss) && loss < best) {
      best = loss;
      sg.scales = std::move(sv);
    }
  }
  if (sg.scales.empty())
    throw Error(ErrorKind::kInvalidInput, "", sg.g.input_site, "every AutoSmoothQuant grid point gave a non-finite loss",
                "check the calibration inputs and the inspected block for NaN / inf");
}

// Mean |Δ|^p of the inspected output over every sample with the candidates
// in place and the group's inputs smoothed and quantized; NaN when the
// output does not line up with the reference.
double AutoSmoothQuantStage::candidate_loss(LayerSession& s, const SearchGroup& sg, const AwqCandidates& cands,
                                            std::span<const float> scales, const SmoothInputQuant& q) {
  const SwappedLinears swap(s.runner(), cands);
  const std::set<std::string> readers(sg.g.linears.begin(), sg.g.linears.end());
  const RefOutput& ref = ref_.at(sg.out_module);
  const double p = scale_loss_power(c_.compute_scale_loss);
  double sum = 0.0;
  bool aligned = true;
  size_t off = 0, end = 0;
  engine::ForwardHooks h;
  h.linear_input = [&](const engine::LinearSite& site, float* x, int64_t rows, int64_t cols) {
    if (readers.count(site.module)) smooth_quantize_input(x, rows, cols, scales, q);
  };
  h.linear_output = [&](const engine::LinearSite& site, float* y, int64_t rows, int64_t cols) {
    if (site.module != sg.out_module) return;
    const size_t n = static_cast<size_t>(rows * cols);
    if (off + n > end) {
      aligned = false;
      return;
    }
    sum += scale_loss_sum(y, ref.values.data() + off, n, p);
    off += n;
  };
  for (size_t i = 0; i < s.samples(); ++i) {
    off = ref.offsets[i];
    end = ref.offsets[i + 1];
    if (sg.ff)
      s.run_state(i, mid_[i], h, engine::LayerPart::kFeedForward);
    else
      s.run_sample(i, h, sg.part);
    aligned = aligned && off == end;
  }
  if (!aligned || ref.values.empty()) return std::numeric_limits<double>::quiet_NaN();
  return sum / static_cast<double>(ref.values.size());
}

// The groups of Quark's AUTOSMOOTHQUANT_MAP by model type, as qloom's group
// kinds (layer_groups.h); empty: every group qloom knows.
std::vector<std::string> quark_default_kinds(std::string_view model_type) {
  if (model_type == "mixtral" || model_type == "granitemoehybrid") return {"attn_in", "attn_out"};
  if (model_type == "qwen3_moe") return {"attn_in", "attn_out", "expert_out"};
  if (model_type == "deepseek_v2" || model_type == "deepseek_v3" || model_type == "qwen3_5")
    return {"mlp_in", "mlp_out"};
  return {};
}

}  // namespace

AutoSmoothQuantStageConfig AutoSmoothQuantStageConfig::from_json(const nlohmann::json& j,
                                                                 std::string_view model_type) {
  AutoSmoothQuantStageConfig c;
  c.compute_scale_loss = default_scale_loss(model_type);
  c.default_kinds = quark_default_kinds(model_type);
  if (j.is_null()) return c;
  if (!j.is_object()) bad_autosmoothquant_key("", "the AutoSmoothQuant config must be a JSON object");
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (key == "name") {
      if (!v.is_string() || v.get<std::string>() != "autosmoothquant") bad_autosmoothquant_key(key, "must be \"autosmoothquant\"");
    } else if (key == "scaling_layers") {
      c.scaling_layers = parse_scaling_layers(v, kAutosmoothquantPrefix + key);
    } else if (key == "model_decoder_layers") {
      c.model_decoder_layers = parse_model_decoder_layers(v, kAutosmoothquantPrefix + key);
    } else if (key == "compute_scale_loss") {
      c.compute_scale_loss = parse_scale_loss(v, kAutosmoothquantPrefix + key);
    } else if (key == "n_grid") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 1000)
        bad_autosmoothquant_key(key, "must be an integer in 1..1000");
      c.n_grid = v.get<int>();
    } else {
      bad_autosmoothquant_key(key, "unknown AutoSmoothQuant config key '" + key + "'");
    }
  }
  return c;
}

std::unique_ptr<AlgorithmStage> make_autosmoothquant_stage(const AutoSmoothQuantStageConfig& config) {
  return std::make_unique<AutoSmoothQuantStage>(config);
}

}  // namespace qloom::quant
