// build_quantization_config (Quark's LLMTemplate.get_config + QConfig.to_dict
// + the exporter's "export" block) and resolve_layer_quant_spec (Quark's
// get_layer_quant_config on a checkpoint's config).
#include "qloom/export/quark_config.h"

#include <cmath>
#include <set>
#include <utility>

#include "qloom/core/error.h"
#include "qloom/export/quark_json_util.h"

namespace qloom::exporter {

using nlohmann::json;
using nlohmann::ordered_json;
using quant::LayerQuantSpec;
using quant::QuantSpec;
using detail::bad;
using detail::join_item;
using detail::kRemedyQuark;
using detail::type_name;

namespace {

using NamedLayers = std::vector<std::pair<std::string, LayerQuantSpec>>;

// Python dict assignment: a present key keeps its position.
void set_entry(NamedLayers& v, const std::string& p, const LayerQuantSpec& l) {
  for (auto& e : v)
    if (e.first == p) {
      e.second = l;
      return;
    }
  v.emplace_back(p, l);
}

bool matches_any(const std::string& name, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (fnmatch(name, p)) return true;
  return false;
}

// template.py _resolve_projection_base_spec: the first layer_quant_config
// pattern that ends with the projection's leaf name or names an attention
// container; nullopt = the global config.
std::optional<LayerQuantSpec> projection_base_spec(const NamedLayers& layers, const std::string& name) {
  const size_t dot = name.rfind('.');
  std::string leaf = name.substr(dot == std::string::npos ? 0 : dot + 1);
  while (!leaf.empty() && leaf.front() == '*') leaf.erase(leaf.begin());
  while (!leaf.empty() && leaf.back() == '*') leaf.pop_back();
  static const char* kAttnTokens[] = {"self_attn", "self_attention", "attn", "attention"};
  for (const auto& [p, spec] : layers) {
    if (!leaf.empty() && p.size() >= leaf.size() && p.compare(p.size() - leaf.size(), leaf.size(), leaf) == 0)
      return spec;
    for (const char* t : kAttnTokens)
      if (p.find(t) != std::string::npos) return spec;
  }
  return std::nullopt;
}

// The base spec of a template-synthesised projection entry (KV or q):
// get_layer_quant_config at template time (first layer_quant_config match,
// else the global config refined by _resolve_projection_base_spec; an
// excluded pattern gets nullopt, or only the KV output of a matching KV
// entry).
std::optional<LayerQuantSpec> template_layer_spec(const QuarkConfigInput& in, const NamedLayers& layers,
                                                  const NamedLayers& kv_layers,
                                                  const std::vector<std::string>& exclude, const std::string& name) {
  std::optional<LayerQuantSpec> lqc;
  bool from_global = true;
  for (const auto& [p, spec] : layers)
    if (fnmatch(name, p)) {
      lqc = spec;
      from_global = false;
      break;
    }
  if (!lqc) lqc = in.global;
  const LayerQuantSpec* kv_match = nullptr;
  for (const auto& [p, spec] : kv_layers)
    if (fnmatch(name, p)) {
      kv_match = &spec;
      break;
    }
  if (matches_any(name, exclude)) {
    if (!kv_match) return std::nullopt;
    LayerQuantSpec only_out;
    only_out.output = kv_match->output;
    return only_out;
  }
  if (from_global)
    if (auto base = projection_base_spec(layers, name)) return base;
  return lqc;
}

// A projection entry: the base's weight / input stages with `output`.
LayerQuantSpec with_output(const LayerQuantSpec& base, const std::optional<QuantSpec>& output) {
  LayerQuantSpec e;
  e.weight = base.weight;
  e.weight_stage2 = base.weight_stage2;
  e.input = base.input;
  e.input_stage2 = base.input_stage2;
  e.output = output;
  return e;
}

void check_input(const QuarkConfigInput& in) {
  if (in.pack_method != "reorder" && in.pack_method != "order")
    throw Error(ErrorKind::kUsage, "", "pack_method",
                "pack_method must be \"reorder\" or \"order\", got \"" + in.pack_method + "\"",
                "use --pack_method reorder (Quark's default)");
  if (!in.algo_config.is_null() && !in.algo_config.is_array())
    throw Error(ErrorKind::kUsage, "", "algo_config",
                std::string("algo_config must be null or a list, got ") + in.algo_config.type_name(), "");
  if (in.kv_cache && in.kv_cache_layers.empty())
    throw Error(ErrorKind::kUsage, "", "kv_cache_layers",
                "KV-cache quantization needs the KV layer patterns (e.g. *k_proj, *v_proj)",
                "pass the model's KV projection patterns");
  if (in.softmax && in.q_layers.empty())
    throw Error(ErrorKind::kUsage, "", "q_layers", "attention quantization needs the q projection pattern (*q_proj)",
                "pass the model's q projection pattern");
  if (!std::isfinite(in.min_kv_scale) || in.min_kv_scale < 0)
    throw Error(ErrorKind::kUsage, "", "min_kv_scale", "min_kv_scale must be a finite value >= 0", "");
}

// What quantize_model does to the config before export
// (quantization/model_transformation.py): setup_config_per_layer replaces
// config.exclude by the names of the excluded quantizable modules (each once,
// in module order); setup_kv_cache_config then clears weight / input_tensors
// of a KV config whose pattern matches an excluded module (it mutates the
// shared QLayerConfig).
std::vector<std::string> exported_exclude(const QuarkConfigInput& in, const std::vector<std::string>& exclude,
                                          NamedLayers& kv_layers) {
  if (!in.quantizable_modules) return exclude;
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& m : *in.quantizable_modules)
    if (!seen.count(m) && matches_any(m, exclude)) {
      out.push_back(m);
      seen.insert(m);
    }
  for (auto& [p, spec] : kv_layers)
    for (const std::string& m : out)
      if (fnmatch(m, p)) {
        spec = with_output(LayerQuantSpec{}, spec.output);
        break;
      }
  return out;
}

ordered_json named_json(const NamedLayers& v, QuarkFormat f) {
  ordered_json o = ordered_json::object();
  for (const auto& [p, spec] : v) o[p] = layer_spec_to_json(spec, f);
  return o;
}

}  // namespace

ordered_json build_quantization_config(const QuarkConfigInput& in) {
  check_input(in);
  const bool v012 = in.format == QuarkFormat::k0_12;
  // 0.12's QConfig.__post_init__ expanded the patterns; 0.13 keeps them verbatim.
  const std::vector<std::string> exclude = v012 ? expand_exclude(in.exclude) : in.exclude;

  // LLMTemplate.get_config: layer names first (_set_layer_name_config), then
  // the KV cache (_set_kv_cache_config), then attention (_set_attention_config).
  NamedLayers layers;
  for (const auto& [p, l] : in.layer_quant_config) set_entry(layers, p, l);
  NamedLayers kv_layers;
  if (in.kv_cache) {
    for (const std::string& name : in.kv_cache_layers) {
      const auto base = template_layer_spec(in, layers, kv_layers, exclude, name);
      LayerQuantSpec entry = with_output(base ? *base : LayerQuantSpec{}, in.kv_cache);
      if (base) set_entry(layers, name, entry);
      set_entry(kv_layers, name, entry);
    }
  }
  if (in.softmax) {
    for (const std::string& name : in.q_layers) {
      const auto base = template_layer_spec(in, layers, kv_layers, exclude, name);
      if (base) set_entry(layers, name, with_output(*base, in.softmax));
    }
  }
  const std::vector<std::string> exported = exported_exclude(in, exclude, kv_layers);

  // QConfig.to_dict() (quark/torch/quantization/config/config.py).
  ordered_json qc = ordered_json::object();
  qc["global_quant_config"] = layer_spec_to_json(in.global, in.format);
  qc["exclude"] = exported;
  qc["algo_config"] = in.algo_config.is_null() ? ordered_json(nullptr) : in.algo_config;
  qc["softmax_quant_spec"] = in.softmax ? quant_spec_to_json(*in.softmax, in.format) : ordered_json(nullptr);
  qc["quant_method"] = "quark";
  qc["layer_type_quant_config"] = ordered_json::object();
  qc["layer_quant_config"] = named_json(layers, in.format);
  qc["kv_cache_quant_config"] = named_json(kv_layers, in.format);
  qc["kv_cache_post_rope"] = in.kv_cache_post_rope;
  qc["quant_mode"] = "eager_mode";
  qc["version"] = in.quark_version.empty() ? std::string(quark_format_version(in.format)) : in.quark_version;

  // dataclasses.asdict(JsonExporterConfig) (quark/torch/export/config/config.py),
  // built in SafetensorsExporter._export_impl (quark/torch/export/api.py):
  // kv_cache_group is the template's KV layers only when kv_cache_quant_config
  // is non-empty.
  ordered_json ex = ordered_json::object();
  ex["weight_merge_groups"] = nullptr;
  ex["kv_cache_group"] = in.kv_cache ? ordered_json(in.kv_cache_layers) : ordered_json::array();
  ex["min_kv_scale"] = in.min_kv_scale;
  ex["weight_format"] = "real_quantized";
  ex["pack_method"] = in.pack_method;
  qc["export"] = std::move(ex);
  return qc;
}

namespace {

template <class J>
std::optional<LayerQuantSpec> resolve_in(const J& qc, const std::string& module, const std::string& file) {
  const std::string root = "quantization_config";
  if (!qc.is_object())
    bad(ErrorKind::kInvalidInput, file, root, "expected an object, got " + type_name(qc), kRemedyQuark);
  auto obj_or_null = [&](const char* key) -> const J* {
    auto it = qc.find(key);
    if (it == qc.end() || it->is_null()) return nullptr;
    if (!it->is_object())
      bad(ErrorKind::kInvalidInput, file, join_item(root, key), "expected an object, got " + type_name(*it),
          kRemedyQuark);
    return &*it;
  };
  auto spec = [&](const J& v, const std::string& item) {
    return layer_spec_from_json(json::parse(v.dump()), item, file);
  };
  std::optional<LayerQuantSpec> result;
  if (const J* lq = obj_or_null("layer_quant_config"))
    for (auto it = lq->begin(); it != lq->end(); ++it)
      if (fnmatch(module, it.key())) {
        result = spec(it.value(), join_item(root, "layer_quant_config." + it.key()));
        break;
      }
  if (!result) {
    auto it = qc.find("global_quant_config");
    if (it == qc.end())
      bad(ErrorKind::kInvalidInput, file, join_item(root, "global_quant_config"), "missing key", kRemedyQuark);
    result = spec(*it, join_item(root, "global_quant_config"));
  }
  std::optional<LayerQuantSpec> kv;
  if (const J* kq = obj_or_null("kv_cache_quant_config"))
    for (auto it = kq->begin(); it != kq->end(); ++it)
      if (fnmatch(module, it.key())) {
        kv = spec(it.value(), join_item(root, "kv_cache_quant_config." + it.key()));
        break;
      }
  auto ex = qc.find("exclude");
  if (ex == qc.end() || ex->is_null()) return result;
  if (!ex->is_array())
    bad(ErrorKind::kInvalidInput, file, join_item(root, "exclude"), "expected a list, got " + type_name(*ex),
        kRemedyQuark);
  for (const auto& p : *ex) {
    if (!p.is_string())
      bad(ErrorKind::kInvalidInput, file, join_item(root, "exclude"), "expected a list of strings", kRemedyQuark);
    if (!fnmatch(module, p.template get<std::string>())) continue;
    if (!kv) return std::nullopt;
    LayerQuantSpec only_out;
    only_out.output = kv->output;
    return only_out;
  }
  return result;
}

}  // namespace

std::optional<LayerQuantSpec> resolve_layer_quant_spec(const json& qc, const std::string& module,
                                                       const std::string& file) {
  return resolve_in(qc, module, file);
}

std::optional<LayerQuantSpec> resolve_layer_quant_spec(const ordered_json& qc, const std::string& module,
                                                       const std::string& file) {
  return resolve_in(qc, module, file);
}

std::optional<QuantSpec> softmax_quant_spec(const json& qc, const std::string& file) {
  auto it = qc.find("softmax_quant_spec");
  if (it == qc.end() || it->is_null()) return std::nullopt;
  return quant_spec_from_json(*it, "quantization_config.softmax_quant_spec", file);
}

}  // namespace qloom::exporter
