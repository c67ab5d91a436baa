// Layer selection: which linear layers of a model get which quantization
// spec, from Quark's command-line vocabulary — a global --quant_scheme,
// --layer_quant_scheme PATTERN SCHEME overrides, --exclude_layers patterns and
// the per-model-type default exclusions (lm_head, MoE routers...).
//
// Patterns are matched against module names (a weight "model.layers.0.mlp.up_proj.weight"
// belongs to module "model.layers.0.mlp.up_proj") with shell-style wildcards
// (fnmatch, `*` also crosses dots), as Quark matches them. Precedence: an
// exclusion wins over everything; then the first --layer_quant_scheme pattern
// that matches; then the global scheme.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

// A linear layer of the source model: module name and weight shape [out, in].
struct LinearLayer {
  std::string module;
  std::vector<uint64_t> shape;
};

struct SelectionRequest {
  std::string model_type;  // for default exclusions
  std::string quant_scheme;
  std::vector<std::pair<std::string, std::string>> layer_quant_scheme;  // pattern, scheme
  std::vector<std::string> exclude_layers;  // user patterns
  bool default_excludes = true;             // add the model type's Quark defaults
};

struct LayerChoice {
  std::string module;
  std::vector<uint64_t> shape;
  std::string scheme;                 // empty when excluded
  std::optional<LayerQuantSpec> spec; // nullopt when excluded
  std::string reason;                 // "global", "layer_quant_scheme <p>", "excluded by <p>"
};

struct Selection {
  std::vector<LayerChoice> layers;         // in the order given
  std::vector<std::string> exclude;        // effective exclusion patterns (defaults + user)
  std::vector<std::string> warnings;       // patterns matching nothing, with near misses
  size_t num_quantized() const;
};

// Linear layers of a model from its weight tensors: every 2-D "<module>.weight"
// except embeddings (module names containing "embed"). lm_head is a linear
// (excluded by the default exclusions, not here).
std::vector<LinearLayer> find_linear_layers(
    const std::vector<std::pair<std::string, std::vector<uint64_t>>>& weights);

// Throws qloom::Error (kUsage) for unknown scheme names, naming the flag.
Selection select_layers(const std::vector<LinearLayer>& layers, const SelectionRequest& req);

// Shell-style wildcard match of a module name, as Quark's patterns match.
bool module_matches(const std::string& pattern, const std::string& module);

}  // namespace qloom::quant
