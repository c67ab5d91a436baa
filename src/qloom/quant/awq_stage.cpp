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

constexpr const char* kPrefix = "algo_config.awq.";

[[noreturn]] void bad(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", kPrefix + key, msg,
              "keys: name, scaling_layers, model_decoder_layers; qloom only: n_grid, duo_scaling, clip, max_shrink, "
              "clip_n_grid, clip_max_tokens, direct_loss_bytes");
}

int stage_of(engine::LayerRunner& r, const std::string& module) {
  for (const engine::LayerLinear& l : r.linears())
    if (l.name == module) return l.stage;
  return -1;
}

engine::LayerPart part_of(engine::LayerRunner& r, const std::string& module) {
  const int st = stage_of(r, module);
  return st >= 0 && st <= 1 ? engine::LayerPart::kAttention : engine::LayerPart::kFull;
}

// True when folding g changes only weights of the feed-forward half (every
// reader and a producer linear are MLP / MoE linears; a producer norm read
// only by them is the feed-forward norm), so the attention half's output
// stays valid.
bool feed_forward_group(engine::LayerRunner& r, const ScalingGroup& g) {
  for (const std::vector<std::string>* v : {&g.linears, &g.fold_only})
    for (const std::string& l : *v)
      if (stage_of(r, l) < 2) return false;
  return g.prev_kind == PrevKind::kNorm || stage_of(r, g.prev_op) >= 2;
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
  // How the group's passes run sample s: through `part`, or the
  // feed-forward half alone on the kept first-half output (mid_).
  // *ff: whether it is the latter.
  AwqSampleRun runner_for(LayerSession& s, const ScalingGroup& g, engine::LayerPart part, bool* ff);
  // Returns false when the group's input saw no calibration token.
  bool search_and_fold(LayerSession& s, const ScalingGroup& g, const ScalingLayerEntry& e,
                       const std::string& out_module);
  void clip_layer(LayerSession& s);

  AwqStageConfig c_;
  ScalingLayersRecord record_;
  UnscaledGroups unscaled_;
  // The layer's residual stream after its attention half, per sample
  // (kFirstHalf), kept while only feed-forward weights change.
  std::vector<std::vector<float>> mid_;
  bool mid_valid_ = false;
  std::map<std::string, int> last_best_;  // grid index chosen last, per group kind (search start)
};

void AwqStage::process_layer(LayerSession& s) {
  engine::LayerRunner& r = s.runner();
  const int layer = static_cast<int>(s.layer());
  std::vector<std::string> unrouted;
  mid_valid_ = false;
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
  std::vector<std::vector<float>>().swap(mid_);
  mid_valid_ = false;
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

AwqSampleRun AwqStage::runner_for(LayerSession& s, const ScalingGroup& g, engine::LayerPart part, bool* ff_run) {
  const bool ff = part == engine::LayerPart::kFull && feed_forward_group(s.runner(), g);
  *ff_run = false;
  if (ff && !mid_valid_ && s.summary().activation_bytes <= c_.direct_loss_bytes) {
    // Kept only within direct_loss_bytes (it is as large as the held inputs).
    PhaseTimer t(s.summary(), "awq.first_half");
    mid_ = s.inputs();
    s.run_on(mid_, engine::ForwardHooks{}, engine::LayerPart::kFirstHalf);
    mid_valid_ = true;
  }
  *ff_run = ff && mid_valid_;
  if (*ff_run)
    return [this, &s](size_t i, const engine::ForwardHooks& h) {
      s.run_state(i, mid_[i], h, engine::LayerPart::kFeedForward);
    };
  return [&s, part](size_t i, const engine::ForwardHooks& h) { s.run_sample(i, h, part); };
}

bool AwqStage::search_and_fold(LayerSession& s, const ScalingGroup& g, const ScalingLayerEntry& e,
                               const std::string& out_module) {
  engine::LayerRunner& r = s.runner();
  bool ff = false;
  const AwqSampleRun run = runner_for(s, g, part_of(r, out_module), &ff);
  AwqReference ref;
  {
    PhaseTimer t(s.summary(), "awq.reference." + g.kind);
    ref = awq_reference_pass(s.samples(), g, out_module, c_.direct_loss_bytes, run, &s.pool());
  }
  if (ref.tokens == 0 || (ref.out.empty() && !ref.gram)) {
    ++s.summary().unscaled_groups;
    return false;
  }
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

  AwqScaleResult best;
  {
    PhaseTimer t(s.summary(), "awq.grid." + g.kind);
    std::unique_ptr<AwqPartLoss> loss;
    if (ref.gram)
      loss = std::make_unique<AwqGramLoss>(out_module, r.linear(out_module), ref.gram_sum, ref.tokens, s.pool());
    else
      loss = std::make_unique<AwqGroupLoss>(r, std::move(ref), out_module, run, s.pool(), ff ? &mid_ : nullptr);
    const auto it = last_best_.find(g.kind);
    const int first = it != last_best_.end() ? it->second : c_.search.n_grid / 4;
    best = awq_search_scales_pruned(x_mean, linears, c_.search, qo, *loss, first);
  }
  last_best_[g.kind] = static_cast<int>(std::lround(best.ratio * c_.search.n_grid));
  fold_into_layer(s, g, best.scales);
  if (!feed_forward_group(r, g)) {
    std::vector<std::vector<float>>().swap(mid_);  // the attention half changed
    mid_valid_ = false;
  }
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
  // Every step-th row an input sees, step = n / min(n, clip_max_tokens)
  // (Quark's n_sample_token rule). The pass assumes n = every calibration
  // token; an input that saw fewer rows (an MoE expert) is collected again
  // in a second pass with its own step.
  const int64_t all = static_cast<int64_t>(s.summary().tokens);
  auto step_for = [&](int64_t n) { return n > 0 ? n / std::min<int64_t>(n, c_.search.clip_max_tokens) : 1; };
  for (auto& [name, rw] : rows) rw.step = step_for(all);
  std::set<std::string> only;  // second pass: just these
  engine::ForwardHooks keep;
  keep.linear_input = [&](const engine::LinearSite& site, float* x, int64_t n, int64_t cols) {
    auto it = rows.find(site.module);
    if (it == rows.end() || (!only.empty() && only.count(site.module) == 0)) return;
    Rows& rw = it->second;
    rw.cols = cols;
    for (int64_t t = 0; t < n; ++t, ++rw.seen)
      if (rw.seen % rw.step == 0) rw.x.insert(rw.x.end(), x + t * cols, x + (t + 1) * cols);
  };
  {
    PhaseTimer t(s.summary(), "awq.clip.keep_pass");
    s.run(keep, engine::LayerPart::kFull);
  }
  for (auto& [name, rw] : rows)
    if (rw.seen != all) {
      only.insert(name);
      rw.step = step_for(rw.seen);
      rw.seen = 0;
      std::vector<float>().swap(rw.x);
    }
  if (!only.empty()) {
    PhaseTimer t(s.summary(), "awq.clip.keep_pass");
    s.run(keep, engine::LayerPart::kFull);
  }
  PhaseTimer timer(s.summary(), "awq.clip.search");
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
