// The Qronos stage of the calibration pipeline (`--quant_algo qronos`; the
// maths in qronos.h, the two-stream statistics in paired_hessian_stage.h),
// configured as Quark's QronosConfig (quark/torch/quantization/config/
// config.py, amd-quark 0.13): keys inside_layer_modules (default: every
// quantized linear of the layer), model_decoder_layers ("model.layers"),
// name ("qronos"), block_size (128), desc_act (true), static_groups (true),
// alpha (1e-3: the dataclass default; its docstring says 1e-6), beta (1e4);
// algo_config() writes exactly these keys in this order
// (QronosConfig.to_dict()). beta only steadies Quark's float32 Cholesky
// factor of the inverse (qronos.h): accepted (> 0) and written back, it
// changes nothing in qloom's double factorization. qloom-only key, accepted
// and not written: damp_retries (4).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/paired_hessian_stage.h"

namespace qloom::quant {

struct QronosConfig {
  PairedHessianCommon common;
  double alpha = 1e-3;
  double beta = 1e4;

  // Strict, as GptaqConfig::from_json ("algo_config.qronos.<key>").
  static QronosConfig from_json(const nlohmann::json& j);
};

std::unique_ptr<AlgorithmStage> make_qronos_stage(const QronosConfig& config);

}  // namespace qloom::quant
