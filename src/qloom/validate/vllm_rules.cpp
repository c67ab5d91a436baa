// Rules of step 6 that read quantization_config against the checkpoint's
// layers: lookup order, fused modules, KV cache, output / bias specs (see
// vllm_rules.h for the vLLM 0.33.0 behaviour each one models).
#include "qloom/validate/vllm_rules.h"

#include <map>

#include "qloom/validate/name_patterns.h"
#include "qloom/validate/step_util.h"

namespace qloom::validate::vllm {

using json = nlohmann::json;

namespace {


std::string more(const std::vector<std::string>& names) {
  if (names.empty()) return "";
  return names.front() + (names.size() > 1 ? " and " + std::to_string(names.size() - 1) + " more" : "");
}

// The exclude glob that Quark (fnmatch) would apply to `m`, if any.
std::string glob_entry_for(const json& qc, const std::string& m) {
  const json& ex = get(qc, "exclude");
  if (!ex.is_array()) return "";
  for (const auto& e : ex)
    if (e.is_string() && e.get<std::string>().rfind("re:", 0) != 0 && e.get<std::string>() != m &&
        glob_match(e.get<std::string>(), m))
      return e.get<std::string>();
  return "";
}

// Whether vLLM excludes the shard `m` as part of its fused layer (nullopt:
// the shards disagree, which rule fused_modules reports).
std::optional<bool> vllm_excludes(const json& qc, const std::string& m, const std::vector<FusedGroup>& groups,
                                  std::string* error) {
  for (const FusedGroup& g : groups) {
    bool member = false;
    for (const auto& s : g.shards) member = member || s == m;
    if (!member) continue;
    if (excluded_by(qc, g.name, error)) return true;
    size_t n = 0;
    for (const auto& s : g.shards) n += excluded_by(qc, s, error) ? 1 : 0;
    if (n != 0 && n != g.shards.size()) return std::nullopt;
    return n != 0;
  }
  return excluded_by(qc, m, error).has_value();
}

}  // namespace

RuleResult rule_lookup_order(const CheckpointView& v) {
  RuleResult r{"lookup_order", "layer-config lookup order", "", {}};
  const auto groups = fused_groups(v.linears);
  std::string regex_error;
  size_t n_excluded = 0, n_layer = 0, n_global = 0;
  const json& ltq = get(v.qc, "layer_type_quant_config");
  if (ltq.is_object())
    for (auto it = ltq.begin(); it != ltq.end(); ++it)
      r.findings.push_back({"layer_type_quant_config['" + it.key() + "']",
                            "vLLM looks layer_type_quant_config up by the layer's Python class (type(module)), which "
                            "never equals a JSON key: this entry is ignored and its layers get global_quant_config",
                            "move the entry into layer_quant_config under name patterns of the layers it is meant for"});
  for (const std::string& m : v.linears) {
    const std::optional<bool> ex = vllm_excludes(v.qc, m, groups, &regex_error);
    if (!ex) continue;
    const bool stored_q = v.is_quantized(m);
    if (*ex && stored_q) {
      r.findings.push_back({m, "vLLM's exclude matches it, so it is built unquantized, but the checkpoint stores it "
                               "quantized (" + m + ".weight_scale)",
                            "remove its entry from quantization_config.exclude, or re-export with the layer excluded"});
    } else if (!*ex && !stored_q) {
      const std::string glob = glob_entry_for(v.qc, m);
      const Resolved res = vllm_lookup(after_from_config(v.qc), m);
      r.findings.push_back({m, "stored unquantized (no " + m + ".weight_scale) but no exclude entry matches it as vLLM "
                               "matches them (the exact name, or 're:' + a regex; globs are not expanded" +
                               (glob.empty() ? std::string(")") : "; '" + glob + "' is a glob)") +
                               ", so vLLM applies " + res.source + " and the weight does not load",
                            "list '" + m + "' (or a 're:' regex) in quantization_config.exclude"});
    } else if (*ex) {
      ++n_excluded;
    } else {
      const Resolved vr = vllm_lookup(v.qc, m), qr = quark_lookup(v.qc, m);
      if (!deep_compare(vr.config, qr.config)) {
        r.findings.push_back({m, "vLLM resolves it to " + vr.source + " but the exporter (Quark's fnmatch lookup) used " +
                                     qr.source + " (" + first_difference(qr.config, vr.config) + ")",
                              "give layer_quant_config keys that name the layers the same way under both lookups "
                              "(a key without '*' matches in vLLM when the layer name is a substring of it)"});
        continue;
      }
      (vr.source == "global_quant_config" ? n_global : n_layer)++;
    }
  }
  if (!regex_error.empty())
    r.findings.push_back({"quantization_config.exclude", "vLLM raises re.error: " + regex_error, "fix the regular expression"});
  r.checked = "exclude → layer_quant_config → layer_type_quant_config → global_quant_config: " +
              std::to_string(v.linears.size()) + " linear layers resolve in vLLM as exported (" +
              std::to_string(n_excluded) + " excluded, " + std::to_string(n_layer) + " by layer_quant_config, " +
              std::to_string(n_global) + " by global_quant_config)";
  return r;
}

RuleResult rule_fused_modules(const CheckpointView& v) {
  RuleResult r{"fused_modules", "fused modules", "", {}};
  const json qc = after_from_config(v.qc);
  const auto groups = fused_groups(v.linears);
  size_t qkv = 0, gate_up = 0;
  for (const FusedGroup& g : groups) {
    (g.name.size() > 8 && g.name.compare(g.name.size() - 8, 8, "qkv_proj") == 0 ? qkv : gate_up)++;
    if (excluded_by(qc, g.name)) continue;
    std::vector<std::string> in, out;
    for (const auto& s : g.shards) (excluded_by(qc, s) ? in : out).push_back(s);
    if (!in.empty() && !out.empty()) {
      r.findings.push_back({g.name, "vLLM raises ValueError (found different quantization schemes for the shards): " +
                                        detail::join(in, ", ") + " excluded, " + detail::join(out, ", ") + " not",
                            "exclude all of " + detail::join(g.shards, ", ") + " or none"});
      continue;
    }
    if (!in.empty()) continue;
    const Resolved first = vllm_lookup(qc, g.shards.front());
    for (size_t i = 1; i < g.shards.size(); ++i) {
      const Resolved other = vllm_lookup(qc, g.shards[i]);
      if (deep_compare(first.config, other.config)) continue;
      r.findings.push_back({g.name, "vLLM raises ValueError (it requires all shards to use the same scheme): " +
                                        g.shards.front() + " resolves to " + first.source + ", " + g.shards[i] +
                                        " to " + other.source + " (" + first_difference(first.config, other.config) + ")",
                            "give " + detail::join(g.shards, ", ") + " one config (same weight / input specs; "
                            "only the KV output spec may differ)"});
      break;
    }
  }
  r.checked = std::to_string(qkv) + " qkv_proj and " + std::to_string(gate_up) +
              " gate_up_proj groups (vLLM's packed_modules_mapping) each resolve to one config";
  return r;
}

namespace {

// from_config's checks of the kv_cache_group entries' output specs.
void check_kv_specs(const json& lqc, const std::vector<std::string>& keys, RuleResult& r) {
  const json& spec = get(lqc[keys.front()], "output_tensors");
  for (const auto& k : keys) {
    if (!lqc[k].is_object() || !lqc[k].contains("output_tensors"))
      r.findings.push_back({"layer_quant_config['" + k + "']", "has no output_tensors key: vLLM raises KeyError",
                            "write the KV-cache spec as its output_tensors"});
    else if (!deep_compare(get(lqc[k], "output_tensors"), spec))
      r.findings.push_back({"layer_quant_config['" + k + "'].output_tensors",
                            "vLLM raises ValueError: the KV-cache layers' output specs differ (" +
                                first_difference(spec, get(lqc[k], "output_tensors"), "output_tensors") + ")",
                            "give every kv_cache_group entry the same output_tensors"});
  }
  const std::string where = "layer_quant_config['" + keys.front() + "'].output_tensors";
  if (spec.is_null())
    r.findings.push_back({where, "null: vLLM raises ValueError (the kv_cache quantization configuration is empty)",
                          "write the fp8_e4m3 per_tensor output spec, or empty kv_cache_group"});
  else if (!(get(spec, "dtype") == "fp8_e4m3") || !(get(spec, "qscheme") == "per_tensor"))
    r.findings.push_back({where, "dtype " + get(spec, "dtype").dump() + ", qscheme " + get(spec, "qscheme").dump() +
                                     ": vLLM's QuarkKVCacheMethod raises NotImplementedError (fp8_e4m3 per_tensor only)",
                          "quantize the KV cache as fp8_e4m3 per_tensor (--kv_cache_dtype fp8)"});
}

// The KV layers' <m>.output_scale tensors (vLLM's k_scale / v_scale): present
// and scalar. Returns how many are.
size_t check_kv_scales(const CheckpointView& v, const json& group, RuleResult& r) {
  size_t scales = 0;
  for (const std::string& m : v.linears) {
    bool kv = false;
    for (const auto& g : group) kv = kv || (g.is_string() && glob_match(g.get<std::string>(), m));
    if (!kv || excluded_by(v.qc, m)) continue;
    const io::TensorInfo* t = v.weights ? v.weights->find(m + ".output_scale") : nullptr;
    if (t == nullptr)
      r.findings.push_back({m + ".output_scale", "missing: vLLM keeps the KV scale at its default 1.0 (no calibrated "
                                                 "scale), which clips or wastes the fp8 range",
                            "re-export with the KV-cache scales (calibrated)"});
    else if (t->numel() != 1)
      r.findings.push_back({m + ".output_scale", "shape " + detail::shape_label(t->shape) +
                                                     ": vLLM raises ValueError (KVCacheScaleParameter expects a scalar)",
                            "write one per-tensor scale"});
    else
      ++scales;
  }
  return scales;
}

}  // namespace

RuleResult rule_kv_cache(const CheckpointView& v) {
  RuleResult r{"kv_cache", "KV cache", "", {}};
  const json& group = get(get(v.qc, "export"), "kv_cache_group");
  if (!group.is_array()) {
    r.findings.push_back({"quantization_config.export.kv_cache_group",
                          group.is_null() ? "missing: vLLM's from_config calls len() on it and raises TypeError"
                                          : "not a list: " + detail::json_brief(group),
                          "write \"kv_cache_group\": [] (no KV-cache quantization) or the KV layer patterns"});
    return r;
  }
  if (group.empty()) {
    r.checked = "export.kv_cache_group is empty: no KV-cache quantization";
    return r;
  }
  const json& lqc = get(v.qc, "layer_quant_config");
  std::vector<std::string> keys;
  if (lqc.is_object())
    for (auto it = lqc.begin(); it != lqc.end(); ++it)
      for (const auto& g : group)
        if (g.is_string() && glob_match(g.get<std::string>(), it.key())) { keys.push_back(it.key()); break; }
  if (keys.empty()) {
    r.findings.push_back({"quantization_config.layer_quant_config",
                          "vLLM raises ValueError: kv_cache_group " + detail::json_brief(group) +
                              " is set but no layer_quant_config key matches it",
                          "add the KV layers' entries (with their output_tensors spec) to layer_quant_config"});
    return r;
  }
  check_kv_specs(lqc, keys, r);
  const size_t scales = check_kv_scales(v, group, r);
  r.checked = "kv_cache_group " + detail::json_brief(group) + " → " + std::to_string(keys.size()) +
              " layer_quant_config entries with one fp8_e4m3 per_tensor output spec; " + std::to_string(scales) +
              " scalar output_scale tensors (vLLM's k_scale / v_scale); vLLM ≥ 0.7.0";
  return r;
}

RuleResult rule_output_and_bias(const CheckpointView& v) {
  RuleResult r{"output_and_bias", "no output / bias quantization outside the KV cache", "", {}};
  const json qc = after_from_config(v.qc);
  std::map<std::string, std::vector<std::string>> bad;
  std::vector<std::string> order;
  for (const std::string& m : v.linears) {
    if (excluded_by(qc, m)) continue;
    const Resolved res = vllm_lookup(qc, m);
    if (!truthy(get(res.config, "output_tensors")) && !truthy(get(res.config, "bias"))) continue;
    if (!bad.count(res.source)) order.push_back(res.source);
    bad[res.source].push_back(m);
  }
  for (const std::string& src : order) {
    const Resolved res = vllm_lookup(qc, bad[src].front());
    const bool out = truthy(get(res.config, "output_tensors"));
    r.findings.push_back({src + " (" + more(bad[src]) + ")",
                          std::string("sets ") + (out ? "output_tensors" : "bias") +
                              ": vLLM raises NotImplementedError (output_tensors and bias quantization are not "
                              "supported; only kv_cache_group layers may carry an output spec, which it clears)",
                          out ? "drop the output spec, or list these layers in export.kv_cache_group"
                              : "drop the bias spec (keep biases unquantized)"});
  }
  r.checked = std::to_string(v.linears.size()) + " linear layers: no output_tensors or bias spec once the kv_cache_group "
              "entries are cleared";
  return r;
}

std::vector<RuleResult> run_rules(const CheckpointView& v) {
  return {rule_lookup_order(v), rule_fused_modules(v), rule_kv_cache(v),
          rule_output_and_bias(v), rule_pack_method(v), rule_scheme_pairs(v)};
}

}  // namespace qloom::validate::vllm
