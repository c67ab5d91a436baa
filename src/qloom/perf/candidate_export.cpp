#include "qloom/perf/candidate_export.h"

#include <algorithm>
#include <set>

#include "qloom/core/error.h"
#include "qloom/perf/precision.h"
#include "qloom/perf/proxy.h"
#include "qloom/quant/layer_selection.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::perf {
namespace {

std::vector<quant::LinearLayer> model_linears(const io::ModelDir& dir) {
  std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes;
  for (const std::string& name : dir.weights().tensor_names()) shapes.emplace_back(name, dir.weights().find(name)->shape);
  return quant::find_linear_layers(shapes);
}

// The global scheme: the quantized precision holding the most parameters
// (first in unit order on ties).
std::string global_scheme(const PartitionPlan& plan, const CandidateConfig& c) {
  std::vector<std::pair<std::string, uint64_t>> params;
  for (const SearchUnit& u : plan.units) {
    const std::string p = c.precision_of(u);
    if (p == kNative) continue;
    auto it = std::find_if(params.begin(), params.end(), [&](const auto& x) { return x.first == p; });
    if (it == params.end()) params.emplace_back(p, u.params);
    else it->second += u.params;
  }
  if (params.empty())
    throw Error(ErrorKind::kUsage, "", "config", "the candidate quantizes no linear: there is nothing to export",
                "a candidate needs at least one quantized unit");
  return std::max_element(params.begin(), params.end(), [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

enum class Scope { kPartition, kLayer, kExact };

// The pattern of one module: kPartition "*.self_attn.*", "*.experts.*",
// "*.shared_expert.*", dense MLP leaves "*.mlp.gate_proj"; kLayer the same
// within one layer ("*.layers.3.self_attn.*", "*.layers.3.mlp.experts.*");
// kExact the name. `leaf` forces leaf patterns ("*.self_attn.q_proj").
std::string module_pattern(const std::string& module, const std::string& partition, Scope scope, bool leaf) {
  if (scope == Scope::kExact) return module;
  const size_t last = module.rfind('.'), prev = module.rfind('.', last - 1);
  const std::string marker = partition == "self_attn" ? ".self_attn."
                             : partition == "routed_moe" ? ".experts."
                             : partition == "shared_expert"
                                 ? (module.find(".shared_experts.") != std::string::npos ? ".shared_experts." : ".shared_expert.")
                                 : "";
  const bool by_leaf = leaf || marker.empty();
  if (scope == Scope::kPartition) return by_leaf ? "*" + module.substr(prev) : "*" + marker + "*";
  const std::string tag = "layers." + std::to_string(layer_of(module)) + ".";
  const size_t at = module.find(tag);
  if (by_leaf) return "*." + module.substr(at);
  return "*." + module.substr(at, module.find(marker, at) + marker.size() - at) + "*";
}

struct Emitter {
  const std::set<std::string>& kv_modules;  // empty unless the KV cache is fp8
  std::string global;
  std::vector<std::pair<std::string, std::string>> entries;
  std::vector<std::string> excludes;

  // One group of modules at one precision.
  void add(const std::vector<UnitModule>& mods, const std::string& partition, const std::string& precision,
           Scope scope) {
    const std::string scheme = get_precision(precision).quant_scheme;
    const bool has_kv = std::any_of(mods.begin(), mods.end(), [&](const UnitModule& m) { return kv_modules.count(m.module); });
    std::set<std::string> pats;
    for (const UnitModule& m : mods) {
      // KV projections under an fp8 cache take their spec from Quark's KV entry
      // (*k_proj / *v_proj): no pattern of ours may also match them.
      if (!scheme.empty() && kv_modules.count(m.module)) continue;
      pats.insert(module_pattern(m.module, partition, scope, !scheme.empty() && has_kv));
    }
    for (const std::string& p : pats) {
      if (scheme.empty()) excludes.push_back(p);
      else if (scheme != global) entries.emplace_back(p, scheme);
    }
  }
};

job::QuantizeOptions build(const PartitionPlan& plan, const CandidateConfig& c, job::QuantizeOptions o,
                                const std::set<std::string>& kv_modules, bool exact) {
  o.quant_scheme = get_precision(global_scheme(plan, c)).quant_scheme;
  Emitter em{kv_modules, o.quant_scheme, {}, {}};
  for (const std::string& part : plan.partitions) {
    const auto units = plan.units_of(part);
    const std::string prec = c.precision_of(part);
    // Layers at the partition's precision share its pattern; native layers are
    // exclusions (which win over any pattern), so they do not break that.
    const bool shared = std::all_of(units.begin(), units.end(), [&](const SearchUnit* u) {
      return c.precision_of(*u) == prec || c.precision_of(*u) == kNative;
    });
    if (!exact && shared) {
      std::vector<UnitModule> mods;
      for (const SearchUnit* u : units) {
        if (c.precision_of(*u) == prec) mods.insert(mods.end(), u->modules.begin(), u->modules.end());
        else em.add(u->modules, part, kNative, Scope::kLayer);
      }
      em.add(mods, part, prec, Scope::kPartition);
      continue;
    }
    for (const SearchUnit* u : units)
      em.add(u->modules, part, c.precision_of(*u), exact ? Scope::kExact : Scope::kLayer);
  }
  o.exclude_layers.insert(o.exclude_layers.end(), em.excludes.begin(), em.excludes.end());
  for (const NativeLinear& n : plan.native)
    if (n.reason.rfind("excluded by", 0) != 0) o.exclude_layers.push_back(n.module);
  o.layer_quant_scheme = em.entries;
  return o;
}

job::QuantizeOptions base_options(const io::ModelDir& dir, const CandidateConfig& c, const ExportSettings& s) {
  job::QuantizeOptions o;
  o.model_dir = dir.path();
  o.output_dir = s.output_dir;
  o.kv_cache_dtype = c.kv_cache == "fp8" ? "fp8" : "";
  o.dataset = s.dataset;
  o.num_calib_data = s.num_calib_data;
  o.seq_len = s.seq_len;
  o.threads = s.threads;
  o.overwrite = s.overwrite;
  o.exclude_layers = s.exclude_layers;
  return o;
}

std::vector<std::string> kv_patterns(const io::ModelDir& dir) {
  const quant::ModelTemplate* t = quant::find_model_template(dir.model_type());
  return t && !t->kv_layers.empty() ? t->kv_layers : std::vector<std::string>{"*k_proj", "*v_proj"};
}

bool matches_any(const std::vector<std::string>& patterns, const std::string& module) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return quant::module_matches(p, module); });
}

// The spec Quark's KV entry for `kv_pattern` takes when no entry matches the
// pattern's own name (quark_config.cpp / Quark's _resolve_projection_base_spec):
// the first entry ending with the projection's leaf or naming an attention
// container, else the global scheme.
std::string kv_base_scheme(const job::QuantizeOptions& o, const std::string& kv_pattern) {
  std::string leaf = kv_pattern.substr(kv_pattern.rfind('.') == std::string::npos ? 0 : kv_pattern.rfind('.') + 1);
  leaf.erase(0, leaf.find_first_not_of('*'));
  while (!leaf.empty() && leaf.back() == '*') leaf.pop_back();
  for (const auto& [p, scheme] : o.layer_quant_scheme)
    if (quant::module_matches(p, kv_pattern)) return scheme;
  for (const auto& [p, scheme] : o.layer_quant_scheme) {
    const bool hit = (!leaf.empty() && p.ends_with(leaf)) || p.find("attn") != std::string::npos ||
                     p.find("attention") != std::string::npos;
    if (hit) return scheme;
  }
  return o.quant_scheme;
}

// No module may be matched by two --layer_quant_scheme patterns (Quark resolves
// them in insertion order, qloom's config reader in key order: only disjoint
// patterns mean the same to both), nor, under an fp8 KV cache, a KV projection
// by any (its entry comes from the KV config).
bool unambiguous(const io::ModelDir& dir, const job::QuantizeOptions& o) {
  const std::vector<std::string> kv = kv_patterns(dir);
  for (const quant::LinearLayer& l : model_linears(dir)) {
    size_t hits = 0;
    for (const auto& [p, scheme] : o.layer_quant_scheme) hits += quant::module_matches(p, l.module) ? 1 : 0;
    if (hits > 1 || (hits == 1 && !o.kv_cache_dtype.empty() && matches_any(kv, l.module))) return false;
  }
  return true;
}

}  // namespace

std::map<std::string, std::string> selected_schemes(const io::ModelDir& dir, const job::QuantizeOptions& o) {
  quant::SelectionRequest req;
  req.model_type = dir.model_type();
  req.quant_scheme = o.quant_scheme;
  req.layer_quant_scheme = o.layer_quant_scheme;
  req.exclude_layers = o.exclude_layers;
  const std::vector<std::string> kv = o.kv_cache_dtype.empty() ? std::vector<std::string>{} : kv_patterns(dir);
  std::map<std::string, std::string> out;
  for (const quant::LayerChoice& c : quant::select_layers(model_linears(dir), req).layers) {
    out[c.module] = c.scheme;
    if (c.scheme.empty()) continue;
    // A KV projection no --layer_quant_scheme pattern matches takes its spec
    // from its KV entry (the first KV pattern matching it).
    const bool by_user = std::any_of(o.layer_quant_scheme.begin(), o.layer_quant_scheme.end(),
                                     [&](const auto& e) { return quant::module_matches(e.first, c.module); });
    if (by_user) continue;
    for (const std::string& p : kv)
      if (quant::module_matches(p, c.module)) {
        out[c.module] = kv_base_scheme(o, p);
        break;
      }
  }
  return out;
}

std::map<std::string, std::string> intended_schemes(const io::ModelDir& dir, const PartitionPlan& plan,
                                                    const CandidateConfig& c) {
  std::map<std::string, std::string> out;
  for (const quant::LinearLayer& l : model_linears(dir)) out[l.module] = "";
  for (const SearchUnit& u : plan.units)
    for (const UnitModule& m : u.modules) out[m.module] = get_precision(c.precision_of(u)).quant_scheme;
  return out;
}

job::QuantizeOptions export_options(const io::ModelDir& dir, const PartitionPlan& plan,
                                         const CandidateConfig& config, const ExportSettings& settings) {
  (void)assignment_of(plan, config);  // validates partitions, precisions, units
  const auto intended = intended_schemes(dir, plan, config);
  std::set<std::string> kv_modules;
  if (config.kv_cache == "fp8")
    for (const quant::LinearLayer& l : model_linears(dir))
      if (matches_any(kv_patterns(dir), l.module)) kv_modules.insert(l.module);
  const job::QuantizeOptions base = base_options(dir, config, settings);
  for (const bool exact : {false, true}) {
    job::QuantizeOptions o = build(plan, config, base, kv_modules, exact);
    if (unambiguous(dir, o) && selected_schemes(dir, o) == intended) return o;
  }
  throw Error(ErrorKind::kUnsupported, dir.path().string(), "--layer_quant_scheme",
              "no Quark layer_quant_config gives every linear this candidate's scheme: " + config.canonical(),
              config.kv_cache == "fp8"
                  ? "with an fp8 KV cache Quark gives every k/v projection one spec: keep their precision uniform"
                  : "report this with the model's config.json");
}

}  // namespace qloom::perf
