// RotationConfig: Quark 0.13's algorithm "rotation" (quark/torch/
// quantization/config/config.py RotationConfig, defaults per model type in
// algo_configs.py ROTATION_MAP), read strictly: every key of Quark's dict is
// known, an unknown key is Error(kUsage) naming it, keys a config omits take
// the model type's default. Quark has a default for "llama" only (r1 on,
// offline and fused; r2, r3, r4 off); for another model type a config file
// must give scaling_layers.
//
// What qloom runs: R1 offline (fused: RMSNorm weights into the next linears,
// the rotation into the embedding / producers / readers / lm_head) and R2
// offline (per head, v_proj outputs and o_proj inputs), with Quark's
// deterministic Hadamard matrices (quant/hadamard.h), optionally in blocks of
// rotation_size. Refused with Error(kUnsupported) and the reason: random_r1 /
// random_r2 (Quark draws them from torch's RNG, which qloom cannot
// reproduce), trainable (SpinQuant training), online_r1_rotation (a per-linear
// input_rotation buffer and an online Hadamard at run time), r3 (a Hadamard on
// q / k after RoPE, patched into the attention forward) and r4 (an online
// Hadamard on down_proj's input). Quark enables none of these by default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::quant {

// One entry of scaling_layers' first_layer / middle_layers / last_layer:
// module name templates with "layer_id" / "pre_layer_id" placeholders.
struct RotationGroup {
  std::vector<std::string> prev_modules;
  std::optional<std::string> norm_module;
  std::vector<std::string> next_modules;
  std::optional<std::vector<std::string>> target_modules;  // online R1 only
};

struct RotationScalingLayers {
  std::vector<RotationGroup> first_layer, middle_layers, last_layer;
};

struct RotationConfig {
  RotationScalingLayers scaling_layers;
  bool r1 = true, r2 = false, r3 = false, r4 = false;
  std::optional<int64_t> rotation_size;
  bool random_r1 = false, random_r2 = false;
  std::string backbone = "model";
  std::string model_decoder_layers = "model.layers";
  std::string v_proj = "self_attn.v_proj";
  std::string o_proj = "self_attn.o_proj";
  std::string self_attn = "self_attn";
  std::string mlp = "mlp";
  std::optional<bool> online_r1_rotation;  // Quark: false when r1, null otherwise
  bool trainable = false;

  // Parses Quark's dict (null: the defaults for model_type). Throws as above;
  // kUnsupported also for a model type without Quark defaults when the
  // config gives no scaling_layers.
  static RotationConfig from_json(const nlohmann::json& j, std::string_view model_type);
  // Quark's defaults for model_type, or nullopt (Quark has none).
  static std::optional<RotationConfig> defaults(std::string_view model_type);
  // The dict Quark writes into quantization_config.algo_config: all of
  // RotationConfig's fields (config.json sorts the keys).
  nlohmann::ordered_json to_json() const;
};

}  // namespace qloom::quant
