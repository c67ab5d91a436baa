#include "qloom/quant/awq_stage.h"

#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/quant/layer_fold.h"

namespace qloom::quant {
namespace {

constexpr const char* kPrefix = "algo_config.awq.";

[[noreturn]] void bad(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", kPrefix + key, msg,
              "keys: name, scaling_layers, model_decoder_layers; qloom only: n_grid, duo_scaling, clip, max_shrink, "
              "clip_n_grid, clip_max_tokens, direct_loss_bytes");
}

// Puts `w` in place of a runner's linear until destroyed (the original is
// moved aside, not copied).
class WeightSwap {
 public:
  void put(engine::LinearWeight& slot, const engine::LinearWeight& w) {
    saved_.emplace_back(&slot, std::move(slot));
    slot = w;
  }
  ~WeightSwap() {
    for (auto& [slot, orig] : saved_) *slot = std::move(orig);
  }

 private:
  std::vector<std::pair<engine::LinearWeight*, engine::LinearWeight>> saved_;
};

engine::LayerPart part_of(engine::LayerRunner& r, const std::string& module) {
  for (const engine::LayerLinear& l : r.linears())
    if (l.name == module) return l.stage <= 1 ? engine::LayerPart::kAttention : engine::LayerPart::kFull;
  return engine::LayerPart::kFull;
}

class AwqStage final : public AlgorithmStage {
 public:
  explicit AwqStage(AwqStageConfig c) : c_(std::move(c)) {}

  std::string name() const override { return "awq"; }

  nlohmann::ordered_json algo_config() const override {
    nlohmann::ordered_json j;
    j["name"] = "awq";
    j["scaling_layers"] = record_.to_json();
    j["model_decoder_layers"] = c_.model_decoder_layers;
    return j;
  }

  void start(const engine::ModelConfig& config) override {
    check_scaling_layers(c_.scaling_layers, config, std::string(kPrefix) + "scaling_layers");
  }

  void process_layer(LayerSession& s) override;

  void finish(PipelineSummary& summary) override { unscaled_.report("AWQ", summary.warnings); }

 private:
  bool selected(const ScalingLayerEntry& e) const { return group_selected(c_.scaling_layers, e); }
  void note_skip(const ScalingLayerEntry& e, const std::string& why) { unscaled_.note(e, why); }
  // Returns false when the group's input saw no calibration token.
  bool search_and_fold(LayerSession& s, const ScalingGroup& g, const ScalingLayerEntry& e,
                       const std::string& out_module);
  void clip_layer(LayerSession& s);

  AwqStageConfig c_;
  ScalingLayersRecord record_;
  UnscaledGroups unscaled_;
};

void AwqStage::process_layer(LayerSession& s) {
  engine::LayerRunner& r = s.runner();
  const int layer = static_cast<int>(s.layer());
  std::vector<std::string> unrouted;
  for (const ScalingGroup& g : layer_scaling_groups(r.config(), layer)) {
    const ScalingLayerEntry e = scaling_entry_of(g, layer);
    if (!selected(e)) continue;
    if (const std::string why = fold_blocker(s, g); !why.empty()) {
      note_skip(e, why);
      continue;
    }
    const std::string out_module = inspect_output_module(r, g);
    if (out_module.empty()) {
      note_skip(e, "the inspected block " + g.inspect + " has no single output linear");
      continue;
    }
    if (!search_and_fold(s, g, e, out_module)) unrouted.push_back(g.input_site);
  }
  if (!unrouted.empty()) {
    std::string msg = "AWQ: " + std::to_string(unrouted.size()) + " scaling group(s) of layer " +
                      std::to_string(layer) +
                      " received no calibration token (MoE experts no sample was routed to) and were left unscaled "
                      "and unclipped: ";
    for (size_t i = 0; i < unrouted.size() && i < 4; ++i) msg += (i ? ", " : "") + unrouted[i];
    if (unrouted.size() > 4) msg += ", ...";
    s.warn(msg);
  }
  if (c_.search.clip) clip_layer(s);
}

bool AwqStage::search_and_fold(LayerSession& s, const ScalingGroup& g, const ScalingLayerEntry& e,
                               const std::string& out_module) {
  engine::LayerRunner& r = s.runner();
  const engine::LayerPart part = part_of(r, out_module);
  const size_t n = static_cast<size_t>(g.channels);
  // A group that inspects its only linear (v -> o, up -> down, MoE experts)
  // keeps that linear's inputs, within direct_loss_bytes, and evaluates each
  // candidate on them directly instead of re-running the layer (the
  // reference path, also taken past the budget).
  const bool single = g.linears.size() == 1 && out_module == g.linears.front() && g.input_site == out_module;
  bool direct = single;
  std::vector<float> xs;
  // Reference pass: mean |x| at the group's input, the inspected output.
  std::vector<double> abs_sum(n, 0.0);
  int64_t tokens = 0;
  std::vector<float> ref;
  engine::ForwardHooks hooks;
  hooks.linear_input = [&](const engine::LinearSite& site, float* x, int64_t rows, int64_t cols) {
    if (site.module != g.input_site) return;
    if (static_cast<size_t>(cols) != n)
      throw Error(ErrorKind::kInternal, "", site.module, "the group's input width differs from its channel count");
    for (int64_t t = 0; t < rows; ++t)
      for (size_t j = 0; j < n; ++j) abs_sum[j] += std::fabs(static_cast<double>(x[t * cols + static_cast<int64_t>(j)]));
    tokens += rows;
    if (!direct) return;
    if ((xs.size() + static_cast<size_t>(rows * cols)) * sizeof(float) > c_.direct_loss_bytes) {
      direct = false;
      std::vector<float>().swap(xs);
      return;
    }
    xs.insert(xs.end(), x, x + rows * cols);
  };
  hooks.linear_output = [&](const engine::LinearSite& site, float* y, int64_t rows, int64_t cols) {
    if (site.module == out_module) ref.insert(ref.end(), y, y + rows * cols);
  };
  s.run(hooks, part);
  if (tokens == 0 || ref.empty()) {
    ++s.summary().unscaled_groups;
    return false;
  }
  std::vector<float> x_mean(n);
  for (size_t j = 0; j < n; ++j) x_mean[j] = static_cast<float>(abs_sum[j] / static_cast<double>(tokens));

  std::map<std::string, QuantTarget> targets;
  for (const QuantTarget& t : s.pending()) targets.emplace(t.linear.name, t);
  std::vector<AwqLinear> linears;
  for (const std::string& l : g.linears) {
    const QuantTarget& t = targets.at(l);  // fold_blocker: every reader is pending
    linears.push_back({l, &r.linear(l), &t.spec});
  }
  AwqQuantOptions qo;
  qo.scale_dtype = targets.at(g.linears.front()).scale_dtype;
  qo.model_dtype = s.model_dtype();
  qo.threads = static_cast<unsigned>(s.pool().size());

  std::vector<float> y;
  const AwqLossFn direct_loss = [&](const AwqCandidates& cand) {
    const engine::LinearWeight& w = cand.at(out_module);
    const int64_t rows = static_cast<int64_t>(xs.size() / n);
    y.resize(static_cast<size_t>(rows * w.out));
    if (y.size() != ref.size()) return std::numeric_limits<double>::quiet_NaN();
    engine::linear(xs.data(), rows, w, y.data(), s.pool());
    double se = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
      const double d = static_cast<double>(y[i]) - ref[i];
      se += d * d;
    }
    return se / static_cast<double>(ref.size());
  };
  const AwqLossFn loss = [&](const AwqCandidates& cand) {
    if (direct) return direct_loss(cand);
    double se = 0.0;
    size_t off = 0;
    {
      WeightSwap swap;
      for (const auto& [name, w] : cand) swap.put(r.linear(name), w);
      engine::ForwardHooks h;
      h.linear_output = [&](const engine::LinearSite& site, float* out, int64_t rows, int64_t cols) {
        if (site.module != out_module) return;
        const size_t m = static_cast<size_t>(rows * cols);
        if (off + m > ref.size()) {
          off = ref.size() + 1;  // shape mismatch: reported as a non-finite loss
          return;
        }
        for (size_t i = 0; i < m; ++i) {
          const double d = static_cast<double>(out[i]) - ref[off + i];
          se += d * d;
        }
        off += m;
      };
      s.run(h, part);
    }
    if (off != ref.size()) return std::numeric_limits<double>::quiet_NaN();
    return se / static_cast<double>(ref.size());
  };
  const AwqScaleResult best = awq_search_scales(x_mean, linears, c_.search, qo, loss);
  fold_into_layer(s, g, best.scales);
  ++s.summary().scaled_groups;
  record_.add(e);
  return true;
}

void AwqStage::clip_layer(LayerSession& s) {
  engine::LayerRunner& r = s.runner();
  std::vector<QuantTarget> targets;
  for (const QuantTarget& t : s.pending())
    if (awq_clip_applies(t.linear.name) && t.spec.qscheme != QScheme::kPerTensor) targets.push_back(t);
  if (targets.empty()) return;
  // One input collector per distinct input (the first linear of each input
  // group, in forward order, sees the rows every member sees).
  std::map<int, std::string> representative;
  for (const engine::LayerLinear& l : r.linears()) representative.emplace(l.input_group, l.name);
  struct Rows {
    int64_t seen = 0, step = 1, cols = 0;
    std::vector<float> x;
  };
  std::map<std::string, Rows> rows;
  for (const QuantTarget& t : targets) rows[representative.at(t.linear.input_group)];
  // Pass 1 counts the rows each input sees, pass 2 keeps every step-th one
  // (step = n / min(n, clip_max_tokens), Quark's n_sample_token rule).
  engine::ForwardHooks count;
  count.linear_input = [&](const engine::LinearSite& site, float*, int64_t n, int64_t) {
    if (auto it = rows.find(site.module); it != rows.end()) it->second.seen += n;
  };
  s.run(count, engine::LayerPart::kFull);
  for (auto& [name, rw] : rows) {
    rw.step = rw.seen > 0 ? rw.seen / std::min<int64_t>(rw.seen, c_.search.clip_max_tokens) : 1;
    rw.seen = 0;
  }
  engine::ForwardHooks keep;
  keep.linear_input = [&](const engine::LinearSite& site, float* x, int64_t n, int64_t cols) {
    auto it = rows.find(site.module);
    if (it == rows.end()) return;
    Rows& rw = it->second;
    rw.cols = cols;
    for (int64_t t = 0; t < n; ++t, ++rw.seen)
      if (rw.seen % rw.step == 0) rw.x.insert(rw.x.end(), x + t * cols, x + (t + 1) * cols);
  };
  s.run(keep, engine::LayerPart::kFull);
  for (const QuantTarget& t : targets) {
    const Rows& rw = rows.at(representative.at(t.linear.input_group));
    if (rw.x.empty()) continue;  // an MoE expert without tokens (warned with its scaling group)
    engine::LinearWeight& w = r.linear(t.linear.name);
    AwqQuantOptions qo;
    qo.scale_dtype = t.scale_dtype;
    qo.model_dtype = s.model_dtype();
    qo.threads = static_cast<unsigned>(s.pool().size());
    const int64_t n_rows = static_cast<int64_t>(rw.x.size()) / w.in;
    const AwqClip clip = awq_search_clip(w, t.spec, rw.x, n_rows, c_.search, qo, t.linear.name);
    apply_awq_clip(w, clip);
  }
}

}  // namespace

AwqStageConfig AwqStageConfig::from_json(const nlohmann::json& j) {
  AwqStageConfig c;
  if (j.is_null()) return c;
  if (!j.is_object()) bad("", "the AWQ config must be a JSON object");
  nlohmann::json search = nlohmann::json::object();
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (key == "name") {
      if (!v.is_string() || v.get<std::string>() != "awq") bad(key, "must be \"awq\"");
    } else if (key == "scaling_layers") {
      c.scaling_layers = parse_scaling_layers(v, kPrefix + key);
    } else if (key == "model_decoder_layers") {
      c.model_decoder_layers = parse_model_decoder_layers(v, kPrefix + key);
    } else if (key == "direct_loss_bytes") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) bad(key, "must be an integer >= 0 (bytes)");
      c.direct_loss_bytes = static_cast<uint64_t>(v.get<int64_t>());
    } else if (key == "n_grid" || key == "duo_scaling" || key == "clip" || key == "max_shrink" ||
               key == "clip_n_grid" || key == "clip_max_tokens") {
      search[key] = v;
    } else {
      bad(key, "unknown AWQ config key '" + key + "'");
    }
  }
  try {
    c.search = AwqConfig::from_json(search);
  } catch (const Error& e) {  // name the key as the stage's config does
    bad(e.item(), e.message());
  }
  return c;
}

std::unique_ptr<AlgorithmStage> make_awq_stage(const AwqStageConfig& config) {
  return std::make_unique<AwqStage>(config);
}

}  // namespace qloom::quant
