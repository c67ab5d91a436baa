// check_config_sizes: the size fields of config.json against the tensors the
// weights actually hold, before anything loops over or allocates by them
// (issue 12: a config claiming 10^12 layers for a 5-layer checkpoint must be
// bad input, not "out of memory" or a hang). ModelDir::weights() runs it on
// every open of an unquantized checkpoint, so every command that reads its
// weights gets it; the engine runs it on quantized ones too.
//
// Checked (HF decoder naming, "model.layers.N." and the multimodal
// "model.language_model." / "language_model.model." prefixes; the text part
// of a nested text_config): num_hidden_layers against the layer indices
// present; num_experts / num_local_experts against the experts of the MoE
// layers; and, for unquantized checkpoints (no quantization_config), the
// shapes: vocab_size and hidden_size (embed_tokens), num_attention_heads,
// num_key_value_heads and head_dim (q/k/v/o or qkv_proj), intermediate_size
// (a dense MLP or mixtral's experts) and moe_intermediate_size (experts).
// A checkpoint without "model.layers." tensors is not checked.
// Throws kInvalidInput, file = config.json, item = the field, e.g.
//   config.json num_hidden_layers = 1000000000000 but the weights hold layers 0..4
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "qloom/io/weight_index.h"

namespace qloom::io {

void check_config_sizes(const nlohmann::json& config, const WeightIndex& weights, const std::string& config_label);

}  // namespace qloom::io
