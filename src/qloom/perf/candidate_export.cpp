#include "qloom/perf/candidate_export.h"

#include <algorithm>
#include <set>

#include "qloom/core/error.h"
#include "qloom/perf/precision.h"
#include "qloom/perf/proxy.h"
#include "qloom/quant/layer_selection.h"

namespace qloom::perf {
namespace {

std::vector<quant::LinearLayer> model_linears(const io::ModelDir& dir) {
  std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes;
  for (const std::string& name : dir.weights().tensor_names()) shapes.emplace_back(name, dir.weights().find(name)->shape);
  return quant::find_linear_layers(shapes);
}

// Compact patterns of a partition's modules: "*.self_attn.*", "*.experts.*",
// "*.shared_expert.*"; dense MLP leaves as "*.<block>.<leaf>".
std::vector<std::string> partition_patterns(const SearchUnit& u) {
  std::set<std::string> out;
  for (const UnitModule& m : u.modules) {
    if (u.partition == "self_attn") out.insert("*.self_attn.*");
    else if (u.partition == "routed_moe") out.insert("*.experts.*");
    else if (u.partition == "shared_expert")
      out.insert(m.module.find(".shared_experts.") != std::string::npos ? "*.shared_experts.*" : "*.shared_expert.*");
    else {
      const size_t leaf = m.module.rfind('.'), block = m.module.rfind('.', leaf - 1);
      out.insert("*" + m.module.substr(block));
    }
  }
  return {out.begin(), out.end()};
}

// Layer units: the partition patterns scoped to the layer ("*.layers.3.self_attn.*").
std::vector<std::string> unit_patterns(const SearchUnit& u) {
  std::vector<std::string> out;
  for (const std::string& p : partition_patterns(u))
    out.push_back(u.layer < 0 ? p : "*.layers." + std::to_string(u.layer) + p.substr(1));
  return out;
}

std::vector<std::string> exact_patterns(const SearchUnit& u) {
  std::vector<std::string> out;
  for (const UnitModule& m : u.modules) out.push_back(m.module);
  return out;
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

// (pattern, scheme) entries of one group of modules: exclusions for native,
// overrides for a scheme other than the global one (or always, when `force`).
void add_entries(const std::vector<std::string>& patterns, const std::string& scheme, const std::string& global,
                 bool force, std::vector<std::pair<std::string, std::string>>& entries,
                 std::vector<std::string>& excludes) {
  for (const std::string& p : patterns) {
    if (scheme.empty()) excludes.push_back(p);
    else if (force || scheme != global) entries.emplace_back(p, scheme);
  }
}

exporter::QuantizeOptions build(const PartitionPlan& plan, const CandidateConfig& c, exporter::QuantizeOptions o,
                                bool exact) {
  o.quant_scheme = get_precision(global_scheme(plan, c)).quant_scheme;
  std::vector<std::pair<std::string, std::string>> layer_entries, partition_entries;
  if (exact) {
    for (const SearchUnit& u : plan.units)
      add_entries(exact_patterns(u), get_precision(c.precision_of(u)).quant_scheme, o.quant_scheme, false,
                  partition_entries, o.exclude_layers);
  } else {
    for (const std::string& part : plan.partitions) {
      std::set<std::string> pats;
      for (const SearchUnit* u : plan.units_of(part))
        for (const std::string& p : partition_patterns(*u)) pats.insert(p);
      add_entries({pats.begin(), pats.end()}, get_precision(c.precision_of(part)).quant_scheme, o.quant_scheme,
                  false, partition_entries, o.exclude_layers);
    }
    for (const SearchUnit& u : plan.units)  // layer overrides, ahead of the partitions' entries
      if (u.layer >= 0 && c.precision_of(u) != c.precision_of(u.partition))
        add_entries(unit_patterns(u), get_precision(c.precision_of(u)).quant_scheme, o.quant_scheme, true,
                    layer_entries, o.exclude_layers);
  }
  for (const NativeLinear& n : plan.native)
    if (n.reason.rfind("excluded by", 0) != 0) o.exclude_layers.push_back(n.module);
  o.layer_quant_scheme = layer_entries;
  o.layer_quant_scheme.insert(o.layer_quant_scheme.end(), partition_entries.begin(), partition_entries.end());
  return o;
}

exporter::QuantizeOptions base_options(const io::ModelDir& dir, const CandidateConfig& c, const ExportSettings& s) {
  exporter::QuantizeOptions o;
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

}  // namespace

std::map<std::string, std::string> selected_schemes(const io::ModelDir& dir, const exporter::QuantizeOptions& o) {
  quant::SelectionRequest req;
  req.model_type = dir.model_type();
  req.quant_scheme = o.quant_scheme;
  req.layer_quant_scheme = o.layer_quant_scheme;
  req.exclude_layers = o.exclude_layers;
  std::map<std::string, std::string> out;
  for (const quant::LayerChoice& c : quant::select_layers(model_linears(dir), req).layers) out[c.module] = c.scheme;
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

exporter::QuantizeOptions export_options(const io::ModelDir& dir, const PartitionPlan& plan,
                                         const CandidateConfig& config, const ExportSettings& settings) {
  (void)assignment_of(plan, config);  // validates partitions, precisions, units
  const auto intended = intended_schemes(dir, plan, config);
  const exporter::QuantizeOptions base = base_options(dir, config, settings);
  exporter::QuantizeOptions o = build(plan, config, base, /*exact=*/false);
  if (selected_schemes(dir, o) == intended) return o;
  o = build(plan, config, base, /*exact=*/true);
  if (selected_schemes(dir, o) != intended)
    throw Error(ErrorKind::kInternal, dir.path().string(), "--layer_quant_scheme",
                "the exporter would not give every linear the candidate's scheme: " + config.canonical(),
                "report this with the model's config.json");
  return o;
}

}  // namespace qloom::perf
