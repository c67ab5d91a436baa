// The derived default group size of a per-group 4-bit scheme (group_default.h).
#include "qloom/agent/group_default.h"

#include <regex>

#include "qloom/agent/quant_plan.h"
#include "qloom/quant/layer_selection.h"

namespace qloom::agent {

std::optional<DerivedGroup> derive_group(const Intent& in, const std::string& scheme,
                                         const std::vector<LinearModule>& modules, const std::vector<bool>& excluded,
                                         const std::vector<std::pair<std::string, std::string>>& overrides) {
  static const std::regex per_group(R"(^(u?int4_wo_)(32|64|128)$)");
  std::smatch g;
  if (in.group_size_stated || !std::regex_match(scheme, g, per_group)) return std::nullopt;
  const std::string stem = g[1].str();
  const std::vector<std::string> candidates = {stem + "128", stem + "64", stem + "32"};
  std::vector<const LinearModule*> layers;  // those the global scheme quantizes
  for (size_t i = 0; i < modules.size(); ++i) {
    bool overridden = false;
    for (const auto& o : overrides) overridden = overridden || quant::module_matches(o.first, modules[i].name);
    if (excluded[i] || overridden) continue;
    bool storable = !in.exclude_unsupported.value;
    for (const auto& c : candidates)
      storable = storable || scheme_layer_problem(c, modules[i].out_features, modules[i].in_features).empty();
    if (storable) layers.push_back(&modules[i]);
  }
  auto first_misfit = [&](const std::string& s) -> const LinearModule* {
    for (const auto* m : layers)
      if (!scheme_layer_problem(s, m->out_features, m->in_features).empty()) return m;
    return nullptr;
  };
  const LinearModule* misfit = first_misfit(scheme);
  if (layers.empty() || !misfit) return std::nullopt;
  for (const auto& c : candidates) {
    if (first_misfit(c)) continue;
    if (c == scheme) return std::nullopt;
    const std::string group = c.substr(stem.size());
    return DerivedGroup{
        c, "group " + group + " is a derived default (no group size was stated): " + scheme + " cannot store " +
               misfit->name + " [" + std::to_string(misfit->out_features) + ", " +
               std::to_string(misfit->in_features) + "] (" +
               scheme_layer_problem(scheme, misfit->out_features, misfit->in_features) + "), and " + group +
               " is the largest of 128, 64, 32 that fits every layer to quantize; say a group size to override"};
  }
  return std::nullopt;
}


}  // namespace qloom::agent
