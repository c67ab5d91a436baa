#include "qloom/quant/paired_hessian_stage.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <regex>

#include "qloom/core/error.h"
#include "qloom/quant/cross_gram.h"
#include "qloom/quant/phase_timer.h"

namespace qloom::quant {
namespace {

bool is_router(const std::string& module) {
  return module.size() > 5 && module.compare(module.size() - 5, 5, ".gate") == 0;
}

}  // namespace

bool PairedHessianCommon::parse(const std::string& algo, const std::string& key, const nlohmann::json& v) {
  auto need = [&](bool ok, const char* what) {
    if (!ok)
      throw Error(ErrorKind::kUsage, "", "algo_config." + algo + "." + key, std::string("must be ") + what,
                  "see Quark's " + algo + " config keys");
  };
  if (key == "block_size") {
    need(v.is_number_integer() && v.get<int64_t>() >= 1, "an integer >= 1");
    block_size = v.get<int64_t>();
  } else if (key == "desc_act") {
    need(v.is_boolean(), "true or false");
    desc_act = v.get<bool>();
  } else if (key == "static_groups") {
    need(v.is_boolean(), "true or false");
    static_groups = v.get<bool>();
  } else if (key == "damp_retries") {
    need(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 10, "an integer in [0, 10]");
    damp_retries = v.get<int>();
  } else if (key == "inside_layer_modules") {
    need(v.is_array(), "a list of module names");
    inside_layer_modules.clear();
    for (const auto& m : v) {
      need(m.is_string() && !m.get<std::string>().empty(), "a list of non-empty strings");
      inside_layer_modules.push_back(m.get<std::string>());
    }
  } else if (key == "model_decoder_layers") {
    need(v.is_string(), "a string");
    model_decoder_layers = v.get<std::string>();
  } else {
    return false;
  }
  return true;
}

void PairedHessianCommon::check(const std::string& algo) const {
  if (!model_decoder_layers.empty() && model_decoder_layers != "model.layers")
    throw Error(ErrorKind::kUnsupported, "", "algo_config." + algo + ".model_decoder_layers",
                "qloom's engine names decoder layers model.layers, not '" + model_decoder_layers + "'",
                "use \"model.layers\" (or omit the key)");
  if (desc_act && !static_groups)
    throw Error(ErrorKind::kUsage, "", "algo_config." + algo + ".static_groups",
                "desc_act requires static_groups (Quark refuses it too)", "set static_groups true, or desc_act false");
}

// One input group's statistics (siblings sharing an input share them).
struct PairedHessianStage::Stats {
  explicit Stats(int64_t in) : h(in), x(in) {}
  // Adds a sample's paired rows (xq: quantized stream, xf: float stream).
  void add(const float* xq, const float* xf, int64_t rows, Cross cross, ThreadPool& pool) {
    h.add(xq, rows, &pool);
    if (cross == Cross::kDelta) {
      a.resize(static_cast<size_t>(rows * h.cols()));
      for (size_t i = 0; i < a.size(); ++i) a[i] = xf[i] - xq[i];
      x.add(a.data(), xq, rows, &pool);
    } else {
      x.add(xf, xq, rows, &pool);
    }
  }
  HessianAccumulator h;
  CrossGramAccumulator x;
  std::vector<float> a;
  std::vector<double> H, X;  // taken once, for the targets that share them
  int users = 0;
};

bool PairedHessianStage::selected(const std::string& module) const {
  if (common_.inside_layer_modules.empty()) return true;
  for (const auto& p : common_.inside_layer_modules)
    if (::fnmatch(("*" + p).c_str(), module.c_str(), 0) == 0) return true;
  return false;
}

nlohmann::json PairedHessianStage::inside_layer_modules_json() const {
  if (!common_.inside_layer_modules.empty()) return common_.inside_layer_modules;
  return common_.template_modules.empty() ? seen_ : common_.template_modules;
}

void PairedHessianStage::process_layer(LayerSession& s) {
  std::vector<QuantTarget> mine;
  for (const QuantTarget& t : s.pending())
    if (selected(t.linear.name)) mine.push_back(t);
  if (mine.empty()) return;
  if (common_.stepped && s.runner().steppable()) run_stepped(s, mine);
  else run_passes(s, mine);
}

// Both streams advanced stage by stage (a dense layer).
void PairedHessianStage::run_stepped(LayerSession& s, const std::vector<QuantTarget>& mine) {
  std::vector<std::vector<float>>* io = mine.size() == s.pending().size() ? s.layer_io() : nullptr;
  std::vector<std::vector<float>>* fio = s.float_layer_io();
  std::vector<std::vector<float>> qcopies, fcopies;
  if (!io) qcopies = s.inputs();
  if (!fio) fcopies = s.float_inputs();
  std::vector<std::vector<float>>& xq = io ? *io : qcopies;
  std::vector<std::vector<float>>& xf = fio ? *fio : fcopies;
  const engine::ForwardHooks qhooks = io ? s.propagation_hooks() : engine::ForwardHooks{};
  const int64_t hidden = s.runner().config().hidden_size;
  std::vector<engine::LayerStep> qsteps(xq.size()), fsteps(xf.size());
  auto advance_float = [&](int to) {
    s.with_float_weights([&] {
      for (size_t i = 0; i < xf.size(); ++i)
        s.runner().advance_layer(xf[i].data(), static_cast<int64_t>(xf[i].size()) / hidden, fsteps[i], to, nullptr);
    });
  };
  auto advance_quant = [&](int to, Stats* st) {
    for (size_t i = 0; i < xq.size(); ++i) {
      const int64_t T = static_cast<int64_t>(xq[i].size()) / hidden;
      s.runner().advance_layer(xq[i].data(), T, qsteps[i], to, &qhooks);
      if (st) st->add(qsteps[i].in.data(), fsteps[i].in.data(), T, cross_, s.pool());
    }
  };
  int last = -1;
  for (const QuantTarget& t : mine) last = std::max(last, t.linear.stage);
  for (int stage = 0; stage <= last; ++stage) {
    std::vector<QuantTarget> part;
    for (const QuantTarget& t : mine)
      if (t.linear.stage == stage) part.push_back(t);
    std::unique_ptr<Stats> st;
    if (!part.empty()) st = std::make_unique<Stats>(part.front().linear.weight->in);
    {
      PhaseTimer timer(s.summary(), name() + ".pass");
      advance_float(stage);
      advance_quant(stage, st.get());
    }
    if (part.empty()) continue;
    std::map<std::string, Stats*> of_target;
    for (const QuantTarget& t : part) of_target[t.linear.name] = st.get();
    quantize_targets(s, part, of_target);
  }
  PhaseTimer timer(s.summary(), name() + ".pass");
  if (io) {
    advance_quant(engine::kLayerDone, nullptr);
    s.outputs_written();
  }
  if (fio) {
    advance_float(engine::kLayerDone);
    s.float_outputs_written();
  }
}

// One pass pair per dependency stage (MoE layers; stepped off).
void PairedHessianStage::run_passes(LayerSession& s, const std::vector<QuantTarget>& mine) {
  std::map<int, std::string> representative;
  std::set<std::string> routers;
  for (const engine::LayerLinear& l : s.runner().linears()) {
    representative.emplace(l.input_group, l.name);
    if (is_router(l.name)) routers.insert(l.name);
  }
  for (int stage = 0; stage <= 3; ++stage) {
    std::vector<QuantTarget> part;
    for (const QuantTarget& t : mine)
      if (t.linear.stage == stage) part.push_back(t);
    if (part.empty()) continue;
    const engine::LayerPart lp = stage <= 1 ? engine::LayerPart::kAttention : engine::LayerPart::kFull;
    std::map<std::string, std::unique_ptr<Stats>> stats;  // by representative
    std::map<std::string, Stats*> of_target;
    for (const QuantTarget& t : part) {
      auto& st = stats[representative.at(t.linear.input_group)];
      if (!st) st = std::make_unique<Stats>(t.linear.weight->in);
      of_target[t.linear.name] = st.get();
    }
    std::map<std::string, std::vector<float>> xq, xf, logits;
    engine::ForwardHooks qh, fh;
    qh.linear_input = [&](const engine::LinearSite& site, float* x, int64_t rows, int64_t cols) {
      if (stats.count(site.module)) xq[site.module].assign(x, x + rows * cols);
    };
    qh.linear_output = [&](const engine::LinearSite& site, float* y, int64_t rows, int64_t cols) {
      if (routers.count(site.module)) logits[site.module].assign(y, y + rows * cols);
    };
    fh.linear_input = [&](const engine::LinearSite& site, float* x, int64_t rows, int64_t cols) {
      if (stats.count(site.module)) xf[site.module].assign(x, x + rows * cols);
    };
    fh.linear_output = [&](const engine::LinearSite& site, float* y, int64_t rows, int64_t cols) {
      auto it = logits.find(site.module);
      if (it == logits.end()) return;
      if (it->second.size() != static_cast<size_t>(rows * cols))
        throw Error(ErrorKind::kInternal, "", site.module, "router replay: the float pass routed a different shape");
      std::copy(it->second.begin(), it->second.end(), y);  // Quark's gate replay
    };
    PhaseTimer timer(s.summary(), name() + ".pass");
    std::vector<float> state;
    for (size_t i = 0; i < s.samples(); ++i) {
      xq.clear(), xf.clear(), logits.clear();
      s.run_sample(i, qh, lp);
      state = s.float_inputs()[i];
      s.with_float_weights([&] { s.run_state(i, state, fh, lp); });
      for (auto& [module, st] : stats) {
        const auto q = xq.find(module), f = xf.find(module);
        if (q == xq.end() && f == xf.end()) continue;  // an expert this sample did not reach
        if (q == xq.end() || f == xf.end() || q->second.size() != f->second.size())
          throw Error(ErrorKind::kInternal, "", module, "the float and quantized passes gave different rows");
        st->add(q->second.data(), f->second.data(), static_cast<int64_t>(q->second.size()) / st->h.cols(), cross_,
                s.pool());
      }
    }
    quantize_targets(s, part, of_target);
  }
}

void PairedHessianStage::quantize_targets(LayerSession& s, const std::vector<QuantTarget>& targets,
                                          const std::map<std::string, Stats*>& of_target) {
  PhaseTimer timer(s.summary(), name() + ".quantize");
  for (const auto& [n, st] : of_target) ++st->users;
  std::vector<std::string> unrouted;
  for (const QuantTarget& t : targets) {
    const std::string& module = t.linear.name;
    Stats& st = *of_target.at(module);
    if (st.h.tokens() == 0 && st.H.empty()) {
      ++s.summary().unrouted_experts;
      unrouted.push_back(module);
      continue;
    }
    if (st.H.empty()) st.H = st.h.take_hessian(), st.X = st.x.take();
    const bool last = --st.users == 0;
    std::vector<double> H = last ? std::move(st.H) : st.H, X = last ? std::move(st.X) : st.X;
    GptqResult r = quantize(t, t.linear.weight->values_f32(), std::move(H), std::move(X), s);
    if (r.stats.fell_back) {
      ++s.summary().algo_fallbacks;
      s.warn(name() + " on " + module + ": " + r.stats.note);
    } else {
      ++s.summary().algo_linears;
    }
    const std::string pat = layer_relative_pattern(module);
    if (seen_set_.insert(pat).second) seen_.push_back(pat);
    s.set_quantized(module, std::move(r.qt), std::move(r.dequantized));
  }
  if (unrouted.empty()) return;
  std::string msg = std::to_string(unrouted.size()) + " linear(s) of layer " + std::to_string(s.layer()) +
                    " received no calibration token (MoE experts no sample was routed to) and were quantized by "
                    "round-to-nearest: ";
  for (size_t i = 0; i < unrouted.size() && i < 4; ++i) msg += (i ? ", " : "") + unrouted[i];
  if (unrouted.size() > 4) msg += ", ...";
  s.warn(msg);
}

}  // namespace qloom::quant
