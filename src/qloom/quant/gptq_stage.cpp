#include "qloom/quant/gptq_stage.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "qloom/core/error.h"
#include "qloom/quant/phase_timer.h"

namespace qloom::quant {
namespace {

[[noreturn]] void bad_gptq_key(const std::string& key, const std::string& msg) {
  throw Error(ErrorKind::kUsage, "", "algo_config.gptq." + key, msg,
              "keys: name, block_size, damp_percent, desc_act, static_groups, inside_layer_modules, "
              "model_decoder_layers, true_sequential, damp_retries");
}

class GptqStage final : public AlgorithmStage {
 public:
  explicit GptqStage(GptqConfig c) : c_(std::move(c)) {}

  std::string name() const override { return "gptq"; }

  nlohmann::ordered_json algo_config() const override {
    nlohmann::ordered_json j;
    j["name"] = "gptq";
    j["block_size"] = c_.block_size;
    j["damp_percent"] = c_.damp_percent;
    j["desc_act"] = c_.desc_act;
    j["static_groups"] = c_.static_groups;
    j["inside_layer_modules"] = !c_.inside_layer_modules.empty() ? c_.inside_layer_modules
                                : !c_.template_modules.empty()   ? c_.template_modules
                                                                 : seen_;
    j["model_decoder_layers"] = c_.model_decoder_layers;
    return j;
  }

  void process_layer(LayerSession& s) override;

 private:
  bool selected(const std::string& module) const {
    if (c_.inside_layer_modules.empty()) return true;
    for (const auto& p : c_.inside_layer_modules)
      if (::fnmatch(("*" + p).c_str(), module.c_str(), 0) == 0) return true;
    return false;
  }
  void run_stage(LayerSession& s, const std::vector<QuantTarget>& targets, engine::LayerPart part);
  void run_stepped(LayerSession& s, const std::vector<QuantTarget>& mine);
  void quantize_targets(LayerSession& s, const std::vector<QuantTarget>& targets,
                        const std::map<std::string, HessianAccumulator*>& of_target);
  GptqOptions options() const;

  GptqConfig c_;
  std::vector<std::string> seen_;  // effective inside_layer_modules (layer-relative)
  std::set<std::string> seen_set_;
};

void GptqStage::process_layer(LayerSession& s) {
  std::vector<QuantTarget> mine;
  for (const QuantTarget& t : s.pending())
    if (selected(t.linear.name)) mine.push_back(t);
  if (mine.empty()) return;
  if (!c_.true_sequential) {
    run_stage(s, mine, engine::LayerPart::kFull);
    return;
  }
  if (c_.stepped && s.runner().steppable()) {
    run_stepped(s, mine);
    return;
  }
  for (int stage = 0; stage <= 3; ++stage) {
    std::vector<QuantTarget> part;
    for (const QuantTarget& t : mine)
      if (t.linear.stage == stage) part.push_back(t);
    if (part.empty()) continue;
    run_stage(s, part, stage <= 1 ? engine::LayerPart::kAttention : engine::LayerPart::kFull);
  }
}

void GptqStage::run_stage(LayerSession& s, const std::vector<QuantTarget>& targets, engine::LayerPart part) {
  // One accumulator per input group, fed by the group's first linear in
  // forward order (all members see the same rows).
  std::map<int, std::string> representative;
  for (const engine::LayerLinear& l : s.runner().linears()) representative.emplace(l.input_group, l.name);
  std::map<std::string, std::unique_ptr<HessianAccumulator>> acc;  // by representative
  std::map<std::string, HessianAccumulator*> of_target;
  for (const QuantTarget& t : targets) {
    const std::string& rep = representative.at(t.linear.input_group);
    auto& a = acc[rep];
    if (!a) a = std::make_unique<HessianAccumulator>(t.linear.weight->in);
    of_target[t.linear.name] = a.get();
  }
  ThreadPool& pool = s.pool();
  engine::ForwardHooks hooks;
  hooks.linear_input = [&](const engine::LinearSite& site, float* x, int64_t rows, int64_t) {
    auto it = acc.find(site.module);
    if (it != acc.end()) it->second->add(x, rows, &pool);
  };
  {
    PhaseTimer t(s.summary(), "gptq.pass");
    s.run(hooks, part);
  }
  quantize_targets(s, targets, of_target);
}

// True-sequential on a dense layer in one pass: each stage's Hessian is the
// input the stage's linears read (LayerStep::in), with the earlier stages
// already quantized; the stage is quantized before the step that runs it.
// As the layer's last stage claiming every pending linear, it advances the
// samples' own inputs to the layer's outputs (the pipeline's propagation);
// otherwise it works on copies and stops after the last stage's Hessian.
void GptqStage::run_stepped(LayerSession& s, const std::vector<QuantTarget>& mine) {
  std::vector<std::vector<float>>* io = mine.size() == s.pending().size() ? s.layer_io() : nullptr;
  std::vector<std::vector<float>> copies;
  if (!io) copies = s.inputs();
  std::vector<std::vector<float>>& xs = io ? *io : copies;
  const engine::ForwardHooks hooks = io ? s.propagation_hooks() : engine::ForwardHooks{};
  const int64_t hidden = s.runner().config().hidden_size;
  std::vector<engine::LayerStep> steps(xs.size());
  auto advance = [&](int to, HessianAccumulator* acc) {
    PhaseTimer t(s.summary(), "gptq.pass");
    for (size_t i = 0; i < xs.size(); ++i) {
      const int64_t T = static_cast<int64_t>(xs[i].size()) / hidden;
      s.runner().advance_layer(xs[i].data(), T, steps[i], to, &hooks);
      if (acc) acc->add(steps[i].in.data(), T, &s.pool());
    }
  };
  int last = -1;
  for (const QuantTarget& t : mine) last = std::max(last, t.linear.stage);
  for (int stage = 0; stage <= last; ++stage) {
    std::vector<QuantTarget> part;
    for (const QuantTarget& t : mine)
      if (t.linear.stage == stage) part.push_back(t);
    std::unique_ptr<HessianAccumulator> acc;
    if (!part.empty()) acc = std::make_unique<HessianAccumulator>(part.front().linear.weight->in);
    advance(stage, acc.get());
    if (part.empty()) continue;
    std::map<std::string, HessianAccumulator*> of_target;
    for (const QuantTarget& t : part) of_target[t.linear.name] = acc.get();
    quantize_targets(s, part, of_target);
  }
  if (!io) return;
  advance(engine::kLayerDone, nullptr);
  s.outputs_written();
}

GptqOptions GptqStage::options() const {
  GptqOptions o;
  o.damp_percent = c_.damp_percent;
  o.block_size = c_.block_size;
  o.act_order = c_.desc_act;
  o.static_groups = c_.static_groups;
  o.damp_retries = c_.damp_retries;
  return o;
}

// GPTQ on each target from its accumulated Hessian (`of_target`; targets
// sharing an accumulator share it: the last one takes it without a copy).
void GptqStage::quantize_targets(LayerSession& s, const std::vector<QuantTarget>& targets,
                                 const std::map<std::string, HessianAccumulator*>& of_target) {
  PhaseTimer timer(s.summary(), "gptq.quantize");
  const GptqOptions o = options();
  ThreadPool& pool = s.pool();
  std::map<const HessianAccumulator*, int> users;  // the last user takes H without a copy
  for (const auto& [name, a] : of_target) ++users[a];
  std::vector<std::string> unrouted;
  for (const QuantTarget& t : targets) {
    const std::string& name = t.linear.name;
    HessianAccumulator& h = *of_target.at(name);
    if (h.tokens() == 0) {  // left to the pipeline's RTN
      ++s.summary().unrouted_experts;
      unrouted.push_back(name);
      continue;
    }
    const engine::LinearWeight& w = *t.linear.weight;
    const std::vector<float> wf = w.values_f32();
    std::vector<double> H = --users[&h] == 0 ? h.take_hessian() : h.hessian();
    GptqResult r = gptq_quantize(wf.data(), static_cast<uint64_t>(w.out), static_cast<uint64_t>(w.in), std::move(H),
                                 t.spec, t.scale_dtype, name + ".weight", s.model_dtype(), o, &pool);
    if (r.stats.fell_back) {
      ++s.summary().algo_fallbacks;
      s.warn("GPTQ on " + name + ": " + r.stats.note);
    } else {
      ++s.summary().algo_linears;
    }
    const std::string pat = layer_relative_pattern(name);
    if (seen_set_.insert(pat).second) seen_.push_back(pat);
    s.set_quantized(name, std::move(r.qt), std::move(r.dequantized));
  }
  if (!unrouted.empty()) {
    std::string msg = std::to_string(unrouted.size());
    msg += " linear(s) of layer ";
    msg += std::to_string(s.layer());
    msg += " received no calibration token (MoE experts no sample was routed to) and were quantized by "
           "round-to-nearest: ";
    for (size_t i = 0; i < unrouted.size() && i < 4; ++i) {
      if (i) msg += ", ";
      msg += unrouted[i];
    }
    if (unrouted.size() > 4) msg += ", ...";
    s.warn(msg);
  }
}

}  // namespace

GptqConfig GptqConfig::from_json(const nlohmann::json& j) {
  GptqConfig c;
  if (j.is_null()) return c;
  if (!j.is_object()) bad_gptq_key("", "the GPTQ config must be a JSON object");
  for (const auto& [key, v] : j.items()) {
    if (v.is_null()) continue;
    auto need = [&](bool ok, const char* what) {
      if (!ok) bad_gptq_key(key, std::string("must be ") + what);
    };
    if (key == "name") {
      need(v.is_string() && v.get<std::string>() == "gptq", "\"gptq\"");
    } else if (key == "block_size") {
      need(v.is_number_integer() && v.get<int64_t>() >= 1, "an integer >= 1");
      c.block_size = v.get<int64_t>();
    } else if (key == "damp_percent") {
      need(v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0, "a number > 0");
      c.damp_percent = v.get<double>();
    } else if (key == "desc_act") {
      need(v.is_boolean(), "true or false");
      c.desc_act = v.get<bool>();
    } else if (key == "static_groups") {
      need(v.is_boolean(), "true or false");
      c.static_groups = v.get<bool>();
    } else if (key == "true_sequential") {
      need(v.is_boolean(), "true or false");
      c.true_sequential = v.get<bool>();
    } else if (key == "damp_retries") {
      need(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 10, "an integer in [0, 10]");
      c.damp_retries = v.get<int>();
    } else if (key == "inside_layer_modules") {
      need(v.is_array(), "a list of module names");
      c.inside_layer_modules.clear();
      for (const auto& m : v) {
        need(m.is_string() && !m.get<std::string>().empty(), "a list of non-empty strings");
        c.inside_layer_modules.push_back(m.get<std::string>());
      }
    } else if (key == "model_decoder_layers") {
      need(v.is_string(), "a string");
      c.model_decoder_layers = v.get<std::string>();
    } else {
      bad_gptq_key(key, "unknown GPTQ config key '" + key + "'");
    }
  }
  if (c.model_decoder_layers != "model.layers")
    throw Error(ErrorKind::kUnsupported, "", "algo_config.gptq.model_decoder_layers",
                "qloom's engine names decoder layers model.layers, not '" + c.model_decoder_layers + "'",
                "use \"model.layers\" (or omit the key)");
  if (c.desc_act && !c.static_groups)
    bad_gptq_key("static_groups", "desc_act requires static_groups (Quark exports only static groups)");
  return c;
}

std::vector<std::string> quark_gptq_modules(const std::string& model_type) {
  static const std::vector<std::string> kDense = {"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj",
                                                  "self_attn.o_proj", "mlp.up_proj",      "mlp.gate_proj",
                                                  "mlp.down_proj"};
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2" || model_type == "gemma2")
    return kDense;
  if (model_type == "gemma3_text")
    return {"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj", "self_attn.o_proj",
            "up_proj",          "gate_proj",        "down_proj"};
  if (model_type == "phi3") return {"self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj"};
  if (model_type == "mixtral") return {"self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj", "self_attn.o_proj"};
  return {};
}

std::vector<std::string> quark_gptaq_modules(const std::string& model_type) {
  if (model_type == "gemma2" || model_type == "gemma3_text") return {};
  return quark_gptq_modules(model_type);
}

std::unique_ptr<AlgorithmStage> make_gptq_stage(const GptqConfig& config) {
  return std::make_unique<GptqStage>(config);
}

}  // namespace qloom::quant
