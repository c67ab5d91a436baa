// The GPTQ stage of the calibration pipeline (algorithm_stage.h), configured
// as Quark's GPTQConfig (quark/torch/quantization/config/config.py, amd-quark
// 0.13): keys name ("gptq"), block_size (128), damp_percent (0.01),
// desc_act (true), static_groups (true), inside_layer_modules,
// model_decoder_layers ("model.layers"); algo_config() writes exactly these
// keys in this order (GPTQConfig.to_dict() = dataclasses.asdict).
// qloom-only keys, accepted on input and not written (Quark's from_dict would
// reject them): true_sequential (default true), damp_retries (4).
//
// Per layer: the linears to quantize (those matching "*" + an
// inside_layer_modules entry, Quark's fnmatch; default: every quantized
// linear of the layer) are taken in dependency stages (LayerLinear::stage:
// q/k/v, o, gate/up (+ experts'), down). With true_sequential each stage's
// Hessians are collected with the earlier stages already quantized (Quark
// quantizes module by module with a forward each; linears sharing an input
// give the same result in one pass; a dense layer is run stage by stage
// once, each stage quantized before it runs, and, when GPTQ is the layer's
// last stage and claims all its linears, that pass also produces the next
// layer's inputs); otherwise all Hessians come from one pass over the float
// layer. Linears sharing an input share one Hessian.
// An MoE expert that received no calibration token is left to the
// pipeline's RTN (counted in unrouted_experts, with a warning); a Cholesky
// failure falls back to RTN (algo_fallbacks, warning).
// Memory: the Hessians of one stage at a time, in double (in_features^2 * 8
// bytes per distinct input: ~254 MB for in_features 5632; an MoE layer
// holds one per expert for the gate/up stage).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/gptq.h"

namespace qloom::quant {

struct GptqConfig {
  int64_t block_size = 128;
  double damp_percent = 0.01;
  bool desc_act = true;
  bool static_groups = true;
  std::vector<std::string> inside_layer_modules;  // empty: every quantized linear
  // Not a config key: Quark's per-model-type default inside_layer_modules
  // (quark_gptq_modules), written as algo_config's inside_layer_modules when
  // the config gives none (the linears run are still every quantized one).
  std::vector<std::string> template_modules;
  std::string model_decoder_layers = "model.layers";
  bool true_sequential = true;  // qloom only
  int damp_retries = 4;         // qloom only
  // Not a config key: true_sequential on a dense layer runs it stage by
  // stage in one pass (LayerRunner::advance_layer), the same arithmetic as
  // one pass per stage (false: what MoE layers do; tests compare the two).
  bool stepped = true;

  // Strict: `j` null/absent keys take the defaults; unknown keys, wrong
  // types, name other than "gptq", desc_act without static_groups, or
  // out-of-range values throw kUsage naming the key.
  static GptqConfig from_json(const nlohmann::json& j);
};

std::unique_ptr<AlgorithmStage> make_gptq_stage(const GptqConfig& config);

// GPTQ_MAP[model_type].inside_layer_modules of amd-quark 0.13
// (quark/torch/quantization/config/algo_configs.py), in Quark's order (llama:
// k, v, q, o, up, gate, down); empty for a model type without an entry.
std::vector<std::string> quark_gptq_modules(const std::string& model_type);
// GPTAQ_MAP / QRONOS_MAP (the same lists): GPTQ's for the model types qloom
// runs, except gemma2 / gemma3_text, which those maps lack (empty).
std::vector<std::string> quark_gptaq_modules(const std::string& model_type);

}  // namespace qloom::quant
