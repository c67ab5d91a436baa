// --attention_dtype fp8: what Quark's LLMTemplate._set_attention_config
// (quark/torch/quantization/config/template.py, amd-quark 0.13) adds to a
// config, and the tensors its export writes:
//   softmax_quant_spec = FP8E4M3PerTensorSpec(observer_method="min_max",
//     is_dynamic=False) (the KV cache's spec: scale_type null), applied to
//     the output of every nn.functional.softmax inside modules whose name
//     ends with "attn" / "attention" (model_transformation.py
//     prepare_for_attention_quant) and exported as
//     <layer>.self_attn.prob_output_scale (model dtype, []);
//   layer_quant_config[q_layer_name] = {weight, input of the projection's
//     base spec, output: the same fp8 spec}, exported as
//     <q_proj>.output_scale. Unlike k_proj / v_proj (kv_cache_group), the q
//     scale is not merged with its siblings'.
// vLLM reads them as the attention's q_scale / prob_scale.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/engine/model.h"
#include "qloom/io/model_dir.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::exporter {

// The spec of --attention_dtype `dtype` ("fp8"); kUsage naming the flag otherwise.
quant::QuantSpec attention_output_spec(std::string_view dtype);

// The template's q_layer_name of `model_type` ("*q_proj" for the decoder
// families qloom runs). kUnsupported for a model whose q projection is fused
// (phi3 "*qkv_proj": Quark would quantize the whole fused output) or unknown.
std::vector<std::string> q_layer_patterns(std::string_view model_type);

// Simulated fp8 attention of a checkpoint whose quantization_config (`qc`)
// has a softmax_quant_spec: sets hooks.attention_probs to fake-quantize each
// attention module's softmax output with its <module>.prob_output_scale, as
// Quark's prob_quantizer does (x -> e4m3(clamp(x / s, ±448)) · s). Returns
// the number of attention modules simulated (0: no softmax spec, hooks left
// alone). Throws kInvalidInput (naming `file`) when the spec is there but no
// prob_output_scale is, kUnsupported for a spec other than static per-tensor
// fp8 / int8.
size_t install_attention_sim(const io::ModelDir& dir, const nlohmann::json& qc, engine::ForwardHooks& hooks,
                             const std::string& file);

// The tensor name of the softmax-output scale of decoder layer `layer`:
// "model.layers.<layer>.self_attn.prob_output_scale".
std::string prob_output_scale_name(int64_t layer);

}  // namespace qloom::exporter
