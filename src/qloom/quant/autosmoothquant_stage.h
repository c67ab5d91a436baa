// The AutoSmoothQuant stage of the calibration pipeline (algorithm_stage.h;
// `--quant_algo autosmoothquant`), configured as Quark's
// AutoSmoothQuantConfig (quark/torch/quantization/config/config.py,
// amd-quark 0.13): keys name ("autosmoothquant"), scaling_layers
// (quant/scaling_layers_config.h; empty or absent: the groups of Quark's
// AUTOSMOOTHQUANT_MAP for the model type among those qloom knows —
// attention groups only for mixtral / granitemoehybrid, attention and the
// experts' up -> down for qwen3_moe, every group otherwise),
// model_decoder_layers ("model.layers"; "" = the same), compute_scale_loss
// ("MSE" / "MAE" / "RMSE"; default per model type, default_scale_loss in
// quant/autosmoothquant.h). algo_config() writes these four keys in this
// order (the dataclass's), scaling_layers = the groups actually folded.
// qloom-only key, accepted on input, never written: n_grid (10).
//
// Per decoder layer, in the order of Quark's AutoSmoothQuantProcessor:
//   1. one reference pass over the calibration samples with the layer's
//      current float weights: max |x| per channel at each group's input,
//      and each inspected block's output (self_attn -> o_proj's, mlp ->
//      down_proj's, a single linear's own), per sample;
//   2. every group's grid search (quant/autosmoothquant.h) on that
//      unsmoothed layer: per ratio, the group's linears replaced by
//      Q_w(W·s)/s and their inputs by s ⊙ Q_in(x/s) (Q_in: the linears'
//      input spec, QuantTarget::input; a static one observed on x/s), the
//      block re-run per sample (a feed-forward group runs the feed-forward
//      half alone on the kept attention-half output), loss = mean |Δ|^p of
//      its output against the reference;
//   3. all groups' scales folded in forward order (fold_into_layer).
// The stage quantizes nothing: the pipeline's RTN (or a later stage)
// quantizes the smoothed weights and observes static scales on the smoothed
// layer, as Quark calibrates after its algorithms.
// Differences from Quark, by design of the pipeline: a layer's inputs come
// from the earlier layers as exported (quantized), where Quark passes the
// float layer's outputs on; groups qloom cannot fold exactly are skipped
// with a warning (GQA v_proj -> o_proj, MoE routers: quant/layer_fold.h);
// scales and losses are computed in double. Groups whose input saw no
// calibration token (MoE experts) are left unscaled (one warning per
// layer).
// Memory: the held activations once more (the kept attention-half output)
// when a feed-forward group is searched, every inspected block's reference
// output (tokens x hidden fp32 each), one candidate per linear of the group
// searched.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/autosmoothquant.h"
#include "qloom/quant/scaling_layers_config.h"

namespace qloom::quant {

struct AutoSmoothQuantStageConfig {
  std::vector<ScalingLayerEntry> scaling_layers;  // empty: the model type's defaults (above)
  std::string model_decoder_layers = "model.layers";
  ScaleLoss compute_scale_loss = ScaleLoss::kMse;
  int n_grid = 10;  // qloom only (not written)
  // Group kinds (layer_groups.h) the defaults cover; empty: every kind.
  std::vector<std::string> default_kinds;

  // The defaults of `model_type` overridden by `j` (null: defaults; null
  // values ignored). Unknown keys, wrong types, name other than
  // "autosmoothquant", a compute_scale_loss other than MSE / MAE / RMSE and
  // n_grid outside 1..1000 throw kUsage naming the key
  // ("algo_config.autosmoothquant.<key>"); another model_decoder_layers
  // kUnsupported.
  static AutoSmoothQuantStageConfig from_json(const nlohmann::json& j, std::string_view model_type);
};

std::unique_ptr<AlgorithmStage> make_autosmoothquant_stage(const AutoSmoothQuantStageConfig& config);

}  // namespace qloom::quant
