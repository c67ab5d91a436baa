#include "qloom/job/quantize_plan.h"

#include <algorithm>
#include <optional>

#include "qloom/core/error.h"
#include "qloom/export/attention_quant.h"
#include "qloom/export/quark_progressive.h"
#include "qloom/model/decoder_layout.h"
#include "qloom/quant/algorithm_registry.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::job {
namespace {

// Layers the Quark layout cannot hold, grouped by layer-independent pattern
// ("*.mlp.down_proj", so the suggested --exclude_layers stays short on deep
// models), shape and their own reason.
struct UnfitLayers {
  std::string pattern;
  std::vector<uint64_t> shape;
  std::string reason;
  size_t count = 0;
};

std::string layer_pattern(const std::string& module) {
  const size_t layers = module.find(".layers.");
  if (layers == std::string::npos) return module;
  const size_t dot = module.find('.', layers + 8);
  return dot == std::string::npos ? module : "*" + module.substr(dot);
}

void add_unfit(std::vector<UnfitLayers>& unfit, const std::string& module,
               const std::vector<uint64_t>& shape, const std::string& reason) {
  const std::string pat = layer_pattern(module);
  for (auto& u : unfit)
    if (u.pattern == pat && u.shape == shape && u.reason == reason) {
      ++u.count;
      return;
    }
  unfit.push_back({pat, shape, reason, 1});
}

// "*.mlp.gate_proj x5 [172, 64]: int4 weights need out_features divisible by 8, ..."
std::string unfit_text(const UnfitLayers& u) {
  std::string shape;
  for (const auto d : u.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  return u.pattern + (u.count > 1 ? " x" + std::to_string(u.count) : "") + " [" + shape + "]: " + u.reason;
}

// Quark's quantizable modules in the model's module order (embeddings, each
// layer's linears, lm_head — also when tied), for the families whose layout
// qloom knows; nullopt otherwise (the exclude list is then written as
// expanded patterns).
std::optional<std::vector<std::string>> quark_module_order(const nlohmann::json& config) {
  model::DecoderShape shape;
  try {
    shape = model::decoder_shape_from_config(config, "config.json");
  } catch (const Error&) {
    return std::nullopt;
  }
  std::vector<std::string> modules;
  for (const auto& t : model::decoder_tensors(shape)) {
    if (t.role != model::TensorRole::kEmbedding && t.role != model::TensorRole::kLinear &&
        t.role != model::TensorRole::kLmHead)
      continue;
    modules.push_back(t.name.substr(0, t.name.size() - std::string(".weight").size()));
  }
  if (shape.tie_word_embeddings) modules.push_back("lm_head");
  return modules;
}

// The error (or warning, under --exclude_unsupported) naming the unfit layers.
void report_unfit(const QuantizeOptions& o, const std::vector<UnfitLayers>& unfit, JobPlan& plan,
                  QuantizeSummary& sum) {
  std::string list, patterns;
  std::vector<std::string> seen;
  for (const auto& u : unfit) {
    if (!list.empty()) list += "; ";
    list += unfit_text(u);
    if (std::find(seen.begin(), seen.end(), u.pattern) != seen.end()) continue;
    seen.push_back(u.pattern);
    patterns += " '" + u.pattern + "'";
  }
  const size_t n = plan.unsupported.size();
  if (!o.exclude_unsupported)
    throw Error(ErrorKind::kUnsupported, o.model_dir.string(), "--quant_scheme",
                std::to_string(n) + " layer(s) cannot be stored in this scheme's Quark layout: " + list,
                "exclude them with --exclude_layers" + patterns +
                    ", or pass --exclude_unsupported to keep them in the source dtype");
  sum.warnings.push_back(std::to_string(n) + " layer(s) kept in the source dtype: " + list);
  sum.layers_quantized -= n;
  sum.layers_excluded += n;
  if (plan.modules.empty())
    throw Error(ErrorKind::kUnsupported, o.model_dir.string(), "--quant_scheme",
                "no linear layer of this model fits the scheme's Quark layout", "choose another scheme");
}

exporter::QuarkConfigInput config_input(const QuantizeOptions& o, const io::ModelDir& src, const JobPlan& plan) {
  exporter::QuarkConfigInput ci;
  ci.global = quant::find_scheme(o.quant_scheme)->linear;
  for (const auto& [pattern, scheme] : o.layer_quant_scheme)
    ci.layer_quant_config.emplace_back(pattern, quant::find_scheme(scheme)->linear);
  ci.exclude = plan.selection.exclude;
  ci.exclude.insert(ci.exclude.end(), plan.unsupported.begin(), plan.unsupported.end());
  ci.algo_config = nullptr;
  ci.quantizable_modules = quark_module_order(src.config());
  ci.min_kv_scale = o.min_kv_scale;
  ci.pack_method = o.pack_method;
  ci.format = exporter::parse_quark_format(o.quark_format_version);
  ci.kv_cache_post_rope = o.kv_cache_post_rope;
  if (!o.attention_dtype.empty()) {
    ci.softmax = exporter::attention_output_spec(o.attention_dtype);
    ci.q_layers = exporter::q_layer_patterns(src.model_type());
  }
  if (!o.kv_cache_dtype.empty()) {
    ci.kv_cache = quant::kv_cache_spec(o.kv_cache_dtype);
    const quant::ModelTemplate* t = quant::find_model_template(src.model_type());
    ci.kv_cache_layers = t && !t->kv_layers.empty() ? t->kv_layers : std::vector<std::string>{"*k_proj", "*v_proj"};
  }
  return ci;
}

// Quark's GPTQ-family processors (gptq, gptaq, qronos) quantize from the
// weights in fp32 and keep the scales they compute: amd-quark 0.13 exports
// their weight_scale as F32 whatever the model dtype (RTN keeps the model
// dtype). The planned (not the configured) weight spec says so through
// scale_type "float32" (quant::quark_scale_dtype), for the decoder-layer
// linears the pipeline hands to the algorithm; config.json keeps Quark's
// "float".
void fp32_algorithm_scales(const QuantizeOptions& o, JobPlan& plan) {
  bool gptq_family = false;
  if (!o.quant_algo.empty())
    for (const auto& a : quant::split_quant_algo(o.quant_algo))
      if (a == "gptq" || a == "gptaq" || a == "qronos") gptq_family = true;
  if (!gptq_family) return;
  for (auto& [module, spec] : plan.planned_modules)
    if (spec.weight && spec.weight->scale_format == quant::ScaleFormat::kFloat && spec.weight->scale_type == "float" &&
        module.find(".layers.") != std::string::npos)
      spec.weight->scale_type = "float32";
}

}  // namespace

PackOrder pack_order_of(const QuantizeOptions& o) {
  if (o.pack_method == "reorder") return PackOrder::kReorder;
  if (o.pack_method == "order") return PackOrder::kSequential;
  throw Error(ErrorKind::kUsage, "", "--pack_method", "unknown pack method '" + o.pack_method + "'",
              "use reorder or order");
}

JobPlan select_modules(const QuantizeOptions& o, const io::ModelDir& src, QuantizeSummary& sum) {
  const io::WeightIndex& w = src.weights();
  std::vector<std::pair<std::string, std::vector<uint64_t>>> weights;
  for (const auto& name : w.tensor_names()) weights.emplace_back(name, w.find(name)->shape);
  quant::SelectionRequest req;
  req.model_type = src.model_type();
  req.quant_scheme = o.quant_scheme;
  req.layer_quant_scheme = o.layer_quant_scheme;
  req.exclude_layers = o.exclude_layers;
  JobPlan plan;
  plan.selection = quant::select_layers(quant::find_linear_layers(weights), req);
  sum.warnings = plan.selection.warnings;
  sum.exclude = plan.selection.exclude;
  for (const auto& c : plan.selection.layers) {
    if (c.spec) {
      plan.modules[c.module] = *c.spec;
      ++sum.layers_quantized;
    } else {
      ++sum.layers_excluded;
    }
  }
  return plan;
}

void drop_unfit_layers(const QuantizeOptions& o, const io::WeightIndex& w, DType model_dtype, PackOrder order,
                       JobPlan& plan, QuantizeSummary& sum) {
  std::vector<UnfitLayers> unfit;  // by pattern, shape and reason, in model order
  for (auto it = plan.modules.begin(); it != plan.modules.end();) {
    const auto& shape = w.find(it->first + ".weight")->shape;
    try {
      const quant::LayerQuantSpec& l = it->second;
      if (l.weight_stage2 && !l.weight_stage2->is_scale_quant)
        (void)exporter::progressive_weight_specs(it->first, shape, *l.weight, *l.weight_stage2, model_dtype, order);
      else
        (void)exporter::quark_weight_specs(it->first, shape, *l.weight, model_dtype, order, l.weight_stage2);
      ++it;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kUnsupported && e.kind() != ErrorKind::kUsage) throw;
      add_unfit(unfit, it->first, shape, e.message());
      plan.unsupported.push_back(it->first);
      it = plan.modules.erase(it);
    }
  }
  if (!plan.unsupported.empty()) report_unfit(o, unfit, plan, sum);
}

void plan_config(const QuantizeOptions& o, const io::ModelDir& src, JobPlan& plan) {
  plan.config = config_input(o, src, plan);
  const nlohmann::ordered_json qc = exporter::build_quantization_config(plan.config);
  for (const auto& c : plan.selection.layers) {
    auto spec = exporter::resolve_layer_quant_spec(qc, c.module);
    if (!spec) continue;
    if (!plan.modules.count(c.module)) spec->weight.reset();  // excluded (or unsupported): only a KV spec remains
    if (spec->weight || (spec->input && !spec->input->is_dynamic) || (spec->output && !spec->output->is_dynamic))
      plan.planned_modules[c.module] = *spec;
  }
  fp32_algorithm_scales(o, plan);
  if (o.kv_cache_dtype.empty()) return;
  const bool any_kv = std::any_of(plan.planned_modules.begin(), plan.planned_modules.end(),
                                  [](const auto& m) { return m.second.output.has_value(); });
  if (!any_kv)
    throw Error(ErrorKind::kUnsupported, o.model_dir.string(), "--kv_cache_dtype",
                "no linear of this model matches the KV-cache layer patterns", "omit --kv_cache_dtype");
}

}  // namespace qloom::job
