// The quantization schemes qloom implements, under AMD Quark's exact
// `--quant_scheme` names, each with the QuantSpec of a linear layer's weight,
// input and output exactly as Quark's LLMTemplate builds it; the FP8 KV-cache
// spec of `--kv_cache_dtype fp8`; and the per-model-type default exclusions
// and KV layer patterns of Quark's LLM templates.
//
// Source of truth (verified field by field, amd-quark 0.13 wheel):
//   quark/torch/quantization/config/template.py   QuantizationSchemeCollection,
//       the *Scheme classes, LLMTemplate._set_kv_cache_config, DEFAULT_TEMPLATES
//   quark/torch/quantization/config/config.py     the *Spec helpers
//       (FP8E4M3PerTensorSpec, FP8E4M3PerChannelSpec, Int8PerTensorSpec,
//       Int4PerGroupSpec, Int4PerChannelSpec, Uint4PerGroupSpec,
//       Uint4PerChannelSpec, OCP_MXFP4Spec) and QTensorConfig.to_dict()
// and cross-checked by dumping LLMTemplate.get("llama").get_config(scheme)
// .to_dict() for every scheme below.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

struct SchemeDef {
  std::string name;          // Quark's --quant_scheme name
  LayerQuantSpec linear;     // weight / input / output specs of every quantized linear
  std::string description;   // one line for help texts and reports
};

// The scheme called `name` (exact, case-sensitive, as Quark), or nullptr.
const SchemeDef* find_scheme(std::string_view name);

// Like find_scheme, but an unknown name throws Error(kUsage, "",
// "--quant_scheme", "unknown scheme 'x'", remedy) whose remedy suggests the
// nearest names ("did you mean 'fp8'?") and lists the known ones. A name that
// Quark knows but qloom does not implement yet (e.g. "nvfp4") throws
// Error(kUnsupported, ...) saying so.
const SchemeDef& get_scheme(std::string_view name);

// Every scheme name, in registry order (Quark's order in
// QuantizationSchemeCollection).
std::vector<std::string> scheme_names();

// Quark --quant_scheme names that qloom does not implement yet.
const std::vector<std::string>& quark_only_scheme_names();

// The output_tensors spec that `--kv_cache_dtype <kv_dtype>` puts on the KV
// projections (Quark's LLMTemplate._set_kv_cache_config). Only "fp8" exists;
// anything else throws Error(kUsage, "", "--kv_cache_dtype", ...).
QuantSpec kv_cache_spec(std::string_view kv_dtype);
std::vector<std::string> kv_cache_dtype_names();

// A model type's entry in Quark's DEFAULT_TEMPLATES.
struct ModelTemplate {
  std::string model_type;                  // HF config.json "model_type"
  std::vector<std::string> exclude_layers; // exclude_layers_name, as Quark lists them
  std::vector<std::string> kv_layers;      // kv_layers_name (k/v projections, KV cache)
};

// The template of `model_type`, or nullptr when Quark has none.
const ModelTemplate* find_model_template(std::string_view model_type);
std::vector<std::string> model_template_names();

// Layers excluded from quantization by default for `model_type`: the
// template's exclude_layers_name (lm_head, MoE routers such as "*.gate" /
// "*mlp.gate", shared-expert gates, ...). Patterns are returned unexpanded
// (Quark's QConfig.__post_init__ later adds "p.*" for each "p").
// For a model type without a template Quark's quantize_quark.py refuses to
// run; qloom falls back to ["lm_head"] (what Quark's older
// configuration_preparation.py did), and the caller should warn.
std::vector<std::string> default_exclude_layers(std::string_view model_type);

// Levenshtein distance (insert / delete / substitute, each cost 1).
size_t edit_distance(std::string_view a, std::string_view b);

// Candidates "close" to `name` (case-insensitive equality, or edit distance
// <= max(2, |name| / 3)), nearest first, ties in candidate order; at most
// `max_results`.
std::vector<std::string> near_misses(std::string_view name, const std::vector<std::string>& candidates,
                                     size_t max_results = 3);

}  // namespace qloom::quant
