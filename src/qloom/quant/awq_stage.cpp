#include "qloom/quant/awq_stage.h"

#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/quant/awq_gram_loss.h"
#include "qloom/quant/awq_group_loss.h"
#include "qloom/quant/layer_fold.h"
#include "qloom/quant/phase_timer.h"

namespace qloom::quant {
namespace {

constexpr const char* kAwqPrefix = "algo_config.awq.";

[[noreturn]] void bad_awq_key(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", kAwqPrefix + key, msg,
              "keys: name, scaling_layers, model_decoder_layers; qloom only: n_grid, duo_scaling, clip, max_shrink, "
              "clip_n_grid, clip_max_tokens, direct_loss_bytes");
}


// Clip inputs: every step-th row one distinct linear input sees.
struct ClipRows {
  int64_t seen = 0, step = 1, cols = 0;
  std::vector<float> x;
  void take(const float* rows, int64_t n, int64_t width) {
    cols = width;
    for (int64_t t = 0; t < n; ++t, ++seen)
      if (seen % step == 0) x.insert(x.end(), rows + t * width, rows + (t + 1) * width);
  }
};

// Quark's n_sample_token rule: every step-th of n rows, at most max_tokens.
int64_t clip_step(int64_t n, int64_t max_tokens) { return n > 0 ? n / std::min<int64_t>(n, max_tokens) : 1; }

// The pending linears the clip search covers, in forward order.
std::vector<QuantTarget> clip_targets(LayerSession& s) {
  std::vector<QuantTarget> targets;
  for (const QuantTarget& t : s.pending())
    if (awq_clip_applies(t.linear.name) && t.spec.qscheme != QScheme::kPerTensor) targets.push_back(t);
  return targets;
}

// Per input group, its first linear in forward order (it sees the rows
// every member sees).
std::map<int, std::string> input_representatives(engine::LayerRunner& r) {
  std::map<int, std::string> rep;
  for (const engine::LayerLinear& l : r.linears()) rep.emplace(l.input_group, l.name);
  return rep;
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

  void start(const model::ModelConfig& config) override {
    check_scaling_layers(c_.scaling_layers, config, std::string(kAwqPrefix) + "scaling_layers");
  }

  void process_layer(LayerSession& s) override;

  void finish(PipelineSummary& summary) override { unscaled_.report("AWQ", summary.warnings); }

 private:
  bool selected(const ScalingLayerEntry& e) const { return group_selected(c_.scaling_layers, e); }
  std::vector<SearchGroup> plan(LayerSession& s);
  // The one reference pass (unscaled layer): per group its AwqReference,
  // the first-half output kept in mid_ when a feed-forward group can use it,
  // and the clip rows of every linear to clip.
  std::vector<AwqReference> reference_pass(LayerSession& s, const std::vector<SearchGroup>& groups);
  // Whether a group's loss runs the feed-forward half alone on mid_.
  bool on_mid(const SearchGroup& lg) const { return lg.ff && !mid_.empty(); }
  // How a group's loss runs sample s: through its part, or on mid_.
  AwqSampleRun runner_for(LayerSession& s, const SearchGroup& lg);
  void search(LayerSession& s, SearchGroup& lg, AwqReference ref);
  void clip_layer(LayerSession& s, const std::vector<SearchGroup>& groups);

  AwqStageConfig c_;
  ScalingLayersRecord record_;
  UnscaledGroups unscaled_;
  // The layer's residual stream after its attention half, per sample
  // (kFirstHalf of the unscaled layer), while the searches run.
  std::vector<std::vector<float>> mid_;
  // Clip rows per representative linear (the first of each input group).
  std::map<std::string, ClipRows> clip_rows_;
  std::map<std::string, int> last_best_;  // grid index chosen last, per group kind (search start)
};

// Quark's order (amd-quark 0.13 awq.py): every group searched on the
// unscaled layer from one reference pass, then all scales folded in forward
// order, then the clip search on the cached inputs divided by the scales.
void AwqStage::process_layer(LayerSession& s) {
  std::vector<SearchGroup> groups = plan(s);
  std::vector<AwqReference> refs = reference_pass(s, groups);
  for (size_t i = 0; i < groups.size(); ++i) search(s, groups[i], std::move(refs[i]));
  std::vector<std::vector<float>>().swap(mid_);
  fold_search_groups(s, "AWQ", groups, record_);
  if (c_.search.clip) clip_layer(s, groups);
  clip_rows_.clear();
}

std::vector<SearchGroup> AwqStage::plan(LayerSession& s) {
  return plan_search_groups(
      s, [this](const ScalingGroup&, const ScalingLayerEntry& e) { return selected(e); }, unscaled_);
}

std::vector<AwqReference> AwqStage::reference_pass(LayerSession& s, const std::vector<SearchGroup>& groups) {
  std::vector<AwqReferenceCollector::Group> specs;
  bool any_ff = false;
  for (const SearchGroup& lg : groups) {
    specs.push_back({&lg.g, lg.out_module});
    any_ff = any_ff || lg.ff;
  }
  AwqReferenceCollector collect(std::move(specs), c_.direct_loss_bytes, &s.pool());
  engine::ForwardHooks hooks = collect.hooks();
  if (c_.search.clip) {  // the clip rows ride along (Quark caches every linear's input)
    const std::map<int, std::string> representative = input_representatives(s.runner());
    const int64_t step = clip_step(static_cast<int64_t>(s.summary().tokens), c_.search.clip_max_tokens);
    for (const QuantTarget& t : clip_targets(s)) clip_rows_[representative.at(t.linear.input_group)].step = step;
    hooks.linear_input = [this, ref_in = std::move(hooks.linear_input)](const engine::LinearSite& site, float* x,
                                                                         int64_t n, int64_t cols) {
      ref_in(site, x, n, cols);
      if (auto it = clip_rows_.find(site.module); it != clip_rows_.end()) it->second.take(x, n, cols);
    };
  }
  const bool keep_mid = any_ff && s.summary().activation_bytes <= c_.direct_loss_bytes;
  if (keep_mid) mid_ = s.inputs();
  for (size_t i = 0; i < s.samples(); ++i) {
    collect.begin_sample();
    if (!keep_mid) {
      PhaseTimer t(s.summary(), "awq.reference.layer");
      s.run_sample(i, hooks, engine::LayerPart::kFull);
      continue;
    }
    {
      PhaseTimer t(s.summary(), "awq.reference.first_half");
      s.run_state(i, mid_[i], hooks, engine::LayerPart::kFirstHalf);  // in place
    }
    PhaseTimer t(s.summary(), "awq.reference.feed_forward");
    s.run_state(i, mid_[i], hooks, engine::LayerPart::kFeedForward);  // mid_[i] unchanged
  }
  PhaseTimer t(s.summary(), "awq.reference.finish");
  return collect.finish();
}

AwqSampleRun AwqStage::runner_for(LayerSession& s, const SearchGroup& lg) {
  if (on_mid(lg))
    return [this, &s](size_t i, const engine::ForwardHooks& h) {
      s.run_state(i, mid_[i], h, engine::LayerPart::kFeedForward);
    };
  const engine::LayerPart part = inspect_part(s.runner(), lg.out_module);
  return [&s, part](size_t i, const engine::ForwardHooks& h) { s.run_sample(i, h, part); };
}

void AwqStage::search(LayerSession& s, SearchGroup& lg, AwqReference ref) {
  engine::LayerRunner& r = s.runner();
  const ScalingGroup& g = lg.g;
  if (ref.tokens == 0 || (ref.out.empty() && !ref.gram)) return;  // no calibration token reached it
  const size_t n = static_cast<size_t>(g.channels);
  std::vector<float> x_mean(n);
  for (size_t j = 0; j < n; ++j) x_mean[j] = static_cast<float>(ref.abs_sum[j] / static_cast<double>(ref.tokens));

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

  PhaseTimer t(s.summary(), "awq.grid." + g.kind);
  std::unique_ptr<AwqPartLoss> loss;
  if (ref.gram) {
    loss = std::make_unique<AwqGramLoss>(lg.out_module, r.linear(lg.out_module), ref.gram_sum, ref.tokens, s.pool());
  } else {
    loss = std::make_unique<AwqGroupLoss>(r, std::move(ref), lg.out_module, runner_for(s, lg), s.pool(),
                                          on_mid(lg) ? &mid_ : nullptr);
  }
  const auto it = last_best_.find(g.kind);
  const int first = it != last_best_.end() ? it->second : c_.search.n_grid / 4;
  AwqScaleResult best = awq_search_scales_pruned(x_mean, linears, c_.search, qo, *loss, first);
  last_best_[g.kind] = static_cast<int>(std::lround(best.ratio * c_.search.n_grid));
  lg.scales = std::move(best.scales);
}

void AwqStage::clip_layer(LayerSession& s, const std::vector<SearchGroup>& groups) {
  engine::LayerRunner& r = s.runner();
  const std::vector<QuantTarget> targets = clip_targets(s);
  if (targets.empty()) return;
  const std::map<int, std::string> representative = input_representatives(r);
  // The cached rows are the unscaled layer's: divide each input by the
  // scales folded into its readers. The step assumed every calibration
  // token reaches the input; one that saw fewer rows (an MoE expert) is
  // collected again, from the folded layer, with its own step.
  std::map<std::string, const std::vector<float>*> scale_of;
  for (const SearchGroup& lg : groups)
    if (!lg.scales.empty())
      for (const std::string& l : lg.g.linears) scale_of[l] = &lg.scales;
  const int64_t all = static_cast<int64_t>(s.summary().tokens);
  std::set<std::string> again;
  for (auto& [name, rw] : clip_rows_) {
    if (rw.seen != all) {
      again.insert(name);
      rw.step = clip_step(rw.seen, c_.search.clip_max_tokens);
      rw.seen = 0;
      std::vector<float>().swap(rw.x);
      continue;
    }
    const auto sc = scale_of.find(name);
    if (sc == scale_of.end() || rw.cols == 0) continue;
    const std::vector<float>& sv = *sc->second;
    for (size_t i = 0; i < rw.x.size(); ++i) rw.x[i] /= sv[i % static_cast<size_t>(rw.cols)];
  }
  if (!again.empty()) {
    PhaseTimer t(s.summary(), "awq.clip.keep_pass");
    engine::ForwardHooks keep;
    keep.linear_input = [&](const engine::LinearSite& site, float* x, int64_t n, int64_t cols) {
      if (again.count(site.module)) clip_rows_.at(site.module).take(x, n, cols);
    };
    s.run(keep, engine::LayerPart::kFull);
  }
  PhaseTimer timer(s.summary(), "awq.clip.search");
  for (const QuantTarget& t : targets) {
    const ClipRows& rw = clip_rows_.at(representative.at(t.linear.input_group));
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
  if (!j.is_object()) bad_awq_key("", "the AWQ config must be a JSON object");
  nlohmann::json search = nlohmann::json::object();
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    if (key == "name") {
      if (!v.is_string() || v.get<std::string>() != "awq") bad_awq_key(key, "must be \"awq\"");
    } else if (key == "scaling_layers") {
      c.scaling_layers = parse_scaling_layers(v, kAwqPrefix + key);
    } else if (key == "model_decoder_layers") {
      c.model_decoder_layers = parse_model_decoder_layers(v, kAwqPrefix + key);
    } else if (key == "direct_loss_bytes") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0) bad_awq_key(key, "must be an integer >= 0 (bytes)");
      c.direct_loss_bytes = static_cast<uint64_t>(v.get<int64_t>());
    } else if (key == "n_grid" || key == "duo_scaling" || key == "clip" || key == "max_shrink" ||
               key == "clip_n_grid" || key == "clip_max_tokens") {
      search[key] = v;
    } else {
      bad_awq_key(key, "unknown AWQ config key '" + key + "'");
    }
  }
  try {
    c.search = AwqConfig::from_json(search);
  } catch (const Error& e) {  // name the key as the stage's config does
    bad_awq_key(e.item(), e.message());
  }
  return c;
}

std::unique_ptr<AlgorithmStage> make_awq_stage(const AwqStageConfig& config) {
  return std::make_unique<AwqStage>(config);
}

}  // namespace qloom::quant
