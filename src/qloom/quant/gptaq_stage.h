// The GPTAQ stage of the calibration pipeline (`--quant_algo gptaq`; the
// maths in gptaq.h, the two-stream statistics in paired_hessian_stage.h),
// configured as Quark's GPTAQConfig (quark/torch/quantization/config/
// config.py, amd-quark 0.13): keys name ("gptaq"), block_size (128),
// damp_percent (0.01), alpha (0.25), desc_act (true), static_groups (true),
// inside_layer_modules (default: every quantized linear of the layer, as
// Quark's templates list them for the dense families), model_decoder_layers
// ("model.layers"); algo_config() writes exactly these keys in this order
// (GPTAQConfig.to_dict() = dataclasses.asdict). qloom-only key, accepted
// and not written: damp_retries (4).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/paired_hessian_stage.h"

namespace qloom::quant {

struct GptaqConfig {
  PairedHessianCommon common;
  double damp_percent = 0.01;
  double alpha = 0.25;

  // Strict: null takes the defaults, null values are ignored; unknown keys,
  // wrong types, name other than "gptaq", desc_act without static_groups or
  // out-of-range values throw kUsage naming "algo_config.gptaq.<key>".
  static GptaqConfig from_json(const nlohmann::json& j);
};

std::unique_ptr<AlgorithmStage> make_gptaq_stage(const GptaqConfig& config);

}  // namespace qloom::quant
