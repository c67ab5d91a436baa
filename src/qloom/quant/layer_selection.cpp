#include "qloom/quant/layer_selection.h"

#include <fnmatch.h>

#include <algorithm>

#include "qloom/core/error.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::quant {
namespace {

// get_scheme's error (with its did-you-mean remedy), attributed to `flag`.
const SchemeDef& scheme_or_throw(const std::string& name, const char* flag) {
  try {
    return get_scheme(name);
  } catch (const Error& e) {
    throw Error(e.kind(), e.file(), flag, e.message(), e.remedy());
  }
}

// Up to three module names closest to a pattern that matched nothing.
std::string closest_layers(const std::string& pattern, const std::vector<LinearLayer>& layers) {
  std::string stripped;
  for (char c : pattern)
    if (c != '*' && c != '?') stripped += c;
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& l : layers) {
    // Distance to the closest substring-sized window, so "q_prj" is near "....q_proj".
    size_t best = edit_distance(stripped, l.module);  // scheme_registry.h
    if (l.module.size() > stripped.size()) {
      for (size_t start = 0; start + stripped.size() <= l.module.size(); ++start)
        best = std::min(best, edit_distance(stripped, l.module.substr(start, stripped.size())));
    }
    scored.emplace_back(best, l.module);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::string out;
  for (size_t i = 0; i < scored.size() && i < 3; ++i) out += (i ? ", " : "") + scored[i].second;
  return out;
}

}  // namespace

size_t Selection::num_quantized() const {
  return static_cast<size_t>(std::count_if(layers.begin(), layers.end(),
                                           [](const LayerChoice& c) { return c.spec.has_value(); }));
}

bool module_matches(const std::string& pattern, const std::string& module) {
  return ::fnmatch(pattern.c_str(), module.c_str(), 0) == 0;
}

std::vector<LinearLayer> find_linear_layers(
    const std::vector<std::pair<std::string, std::vector<uint64_t>>>& weights) {
  std::vector<LinearLayer> out;
  constexpr std::string_view kSuffix = ".weight";
  for (const auto& [name, shape] : weights) {
    if (shape.size() != 2 || name.size() <= kSuffix.size() ||
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
      continue;
    std::string module = name.substr(0, name.size() - kSuffix.size());
    if (module.find("embed") != std::string::npos) continue;
    out.push_back({std::move(module), shape});
  }
  return out;
}

Selection select_layers(const std::vector<LinearLayer>& layers, const SelectionRequest& req) {
  Selection sel;
  const SchemeDef& global = scheme_or_throw(req.quant_scheme, "--quant_scheme");
  std::vector<std::pair<std::string, const SchemeDef*>> overrides;
  for (const auto& [pattern, scheme] : req.layer_quant_scheme)
    overrides.emplace_back(pattern, &scheme_or_throw(scheme, "--layer_quant_scheme"));
  if (req.default_excludes) sel.exclude = default_exclude_layers(req.model_type);
  for (const auto& p : req.exclude_layers)
    if (std::find(sel.exclude.begin(), sel.exclude.end(), p) == sel.exclude.end()) sel.exclude.push_back(p);

  std::vector<bool> exclude_used(sel.exclude.size(), false), override_used(overrides.size(), false);
  for (const auto& layer : layers) {
    LayerChoice c{layer.module, layer.shape, "", std::nullopt, ""};
    for (size_t i = 0; i < sel.exclude.size() && c.reason.empty(); ++i) {
      if (module_matches(sel.exclude[i], layer.module)) {
        exclude_used[i] = true;
        c.reason = "excluded by '" + sel.exclude[i] + "'";
      }
    }
    if (c.reason.empty()) {
      for (size_t i = 0; i < overrides.size() && c.reason.empty(); ++i) {
        if (module_matches(overrides[i].first, layer.module)) {
          override_used[i] = true;
          c.scheme = overrides[i].second->name;
          c.spec = overrides[i].second->linear;
          c.reason = "--layer_quant_scheme '" + overrides[i].first + "'";
        }
      }
    }
    if (c.reason.empty()) {
      c.scheme = global.name;
      c.spec = global.linear;
      c.reason = "--quant_scheme";
    }
    sel.layers.push_back(std::move(c));
  }
  // User patterns that select nothing are almost always typos: say so, with
  // the closest module names. (Default exclusions for layers a model lacks,
  // e.g. MoE routers in a dense model, are expected to match nothing.)
  for (size_t i = 0; i < sel.exclude.size(); ++i) {
    const bool user = std::find(req.exclude_layers.begin(), req.exclude_layers.end(), sel.exclude[i]) !=
                      req.exclude_layers.end();
    if (user && !exclude_used[i])
      sel.warnings.push_back("--exclude_layers pattern '" + sel.exclude[i] +
                             "' matches no linear layer; closest: " + closest_layers(sel.exclude[i], layers));
  }
  for (size_t i = 0; i < overrides.size(); ++i)
    if (!override_used[i])
      sel.warnings.push_back("--layer_quant_scheme pattern '" + overrides[i].first +
                             "' matches no quantized linear layer; closest: " +
                             closest_layers(overrides[i].first, layers));
  return sel;
}

}  // namespace qloom::quant
