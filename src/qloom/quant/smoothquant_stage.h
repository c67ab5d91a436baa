// The SmoothQuant stage of the calibration pipeline (algorithm_stage.h;
// `--quant_algo smoothquant`), configured as Quark's SmoothQuantConfig
// (quark/torch/quantization/config/config.py, amd-quark 0.12.post1): keys
// name ("smooth"), alpha (per model type, default_smoothquant_alpha in
// quant/smoothquant.h: 1 for the dense families, 0.8 for MoE), scale_clamp_min
// (1e-3), scaling_layers (quant/scaling_layers_config.h; empty or absent:
// every scaling group qloom knows, quant/layer_groups.h), model_decoder_layers
// ("model.layers"; "" = the same). algo_config() writes exactly these keys in
// this order (SmoothQuantConfig.to_dict()); alpha is written as an integer
// when it is one (Quark's maps write alpha=1), scaling_layers = the groups
// actually folded (the union over layers), which validators read.
//
// Per decoder layer, as Quark's SmoothQuantProcessor (awq/smooth.py): one
// pass over the calibration samples with the layer's current float weights
// records max |x| per channel at each group's input; then for each group in
// forward order that fold_blocker (quant/layer_fold.h) allows and the config
// selects, smoothquant_scales (weight max over the group's linears as they
// are now) and fold_into_layer. One pass suffices: a fold leaves every
// other group's input unchanged (it changes only its own readers' input).
// The stage quantizes nothing: a later stage (gptq) or the pipeline's RTN
// quantizes the smoothed weights, and the pipeline's pass after the stages
// observes static activation scales on the smoothed layer.
// A group whose input saw no calibration token (an MoE expert no sample was
// routed to) is not scaled (max |x| = 0 would give every channel the clamp
// scale): counted in PipelineSummary::unscaled_groups, one warning per layer.
// Differences from Quark: a layer's calibration inputs come from the earlier
// layers as exported (quantized, smoothed), where Quark's SmoothQuant runs on
// the float model; s is computed in double and rounded once to fp32 (Quark
// casts the activation max to the weight dtype first); groups qloom cannot
// fold exactly are skipped with a warning (quant/layer_fold.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/scaling_layers_config.h"
#include "qloom/quant/smoothquant.h"

namespace qloom::quant {

struct SmoothQuantStageConfig {
  SmoothQuantConfig params;                       // alpha, scale_clamp_min
  std::vector<ScalingLayerEntry> scaling_layers;  // empty: every group qloom knows
  std::string model_decoder_layers = "model.layers";

  // The defaults of `model_type` overridden by `j` (null: defaults; null
  // values ignored). Unknown keys, wrong types, name other than "smooth",
  // alpha outside [0, 1], scale_clamp_min <= 0 throw kUsage naming the key
  // ("algo_config.smoothquant.<key>"); another model_decoder_layers or an
  // unsupported model_type kUnsupported.
  static SmoothQuantStageConfig from_json(const nlohmann::json& j, std::string_view model_type);
};

std::unique_ptr<AlgorithmStage> make_smoothquant_stage(const SmoothQuantStageConfig& config);

}  // namespace qloom::quant
