// SmoothQuant (Xiao et al. 2023) as Quark computes it: for a scaling group
// (quant/layer_groups.h) with per-input-channel activation absmax a_j (max |x|
// over all calibration tokens at the group's input_site, collected by the
// caller through engine::ForwardHooks::linear_input) and the group's
// quantized linears W_1..W_m:
//     w_j = max(max_m max_k |W_m[k, j]|, 1e-5)
//     s_j = max(a_j^alpha / w_j^(1 - alpha), scale_clamp_min)
// then folded (quant/smoothing.h): producer / s, readers · s. No
// normalization of s. Source: amd-quark wheel
// quark/torch/algorithm/awq/smooth.py (SmoothQuantProcessor._search_best_scale:
// weight max clamp(min=1e-5), scales clamp(min=scale_clamp_min)) and
// quantization/config/config.py SmoothQuantConfig (alpha 1, scale_clamp_min
// 1e-3 by default). Quark casts a to the weight dtype first (bf16 models
// compute s in bf16); qloom computes in double and rounds s once to fp32.
//
// Default alpha per model_type (Quark algo_configs.py SQ_MAP):
//   llama 1, mistral 1, qwen2 1, phi3 1 (explicit alpha=1); gemma2,
//   gemma3_text 1 (no alpha given: the class default 1); mixtral 0.8 (with
//   scale_clamp_min 1e-3). Quark has no SmoothQuant map for qwen3, gemma,
//   qwen2_moe, qwen3_moe; qloom uses by analogy qwen3 1 (qwen2 family),
//   gemma 1 (gemma2/3), qwen2_moe and qwen3_moe 0.8 (Quark's MoE maps: mixtral,
//   deepseek_v2/v3, llama4, granitemoehybrid all use 0.8).
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/engine/gemm.h"
#include "qloom/model/model_config.h"

namespace qloom::quant {

// The default alpha of `model_type` (table above); Error(kUnsupported) for a
// model type the engine does not support.
double default_smoothquant_alpha(std::string_view model_type);

struct SmoothQuantConfig {
  double alpha = 1.0;            // migration strength, in [0, 1]
  double scale_clamp_min = 1e-3; // lower bound of s, > 0

  // The defaults of `model_type`, overridden by the keys of `j` (an object
  // with only "alpha" and/or "scale_clamp_min"; null = no overrides).
  // Throws Error(kUsage, "", "<key>", ...) for an unknown key (listing the
  // known ones), a non-number, alpha outside [0, 1] or a clamp <= 0 / non-finite.
  static SmoothQuantConfig from_json(const nlohmann::json& j, std::string_view model_type);

  // Quark's SmoothQuantConfig dict (dataclasses.asdict): name "smooth",
  // alpha, scale_clamp_min, scaling_layers (quark_scaling_layers),
  // model_decoder_layers "model.layers". (The pipeline's SmoothQuant stage,
  // smoothquant_stage.h, writes the groups it actually folded, in Quark's
  // key order, rather than every applicable group.)
  nlohmann::json to_json(const model::ModelConfig& config) const;
};

// s for one group. act_absmax: per input channel max |x| (size = every
// linear's in); linears: the group's quantized linears (fold-only readers
// such as MoE routers are not passed). Throws Error(kUsage) for empty or
// mismatched inputs, Error(kInvalidInput) for a negative / non-finite absmax.
std::vector<float> smoothquant_scales(std::span<const float> act_absmax,
                                      const std::vector<const engine::LinearWeight*>& linears,
                                      const SmoothQuantConfig& config);

}  // namespace qloom::quant
