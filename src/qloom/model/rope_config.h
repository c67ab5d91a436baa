// RoPE settings of config.json in every form transformers writes:
//   4.x: top-level "rope_theta" + "rope_scaling" ({"rope_type"|"type": ...,
//        factor, ...} or null); gemma3_text adds "rope_local_base_freq" for
//        its sliding layers; phi3 a top-level "partial_rotary_factor".
//   5.x: "rope_parameters" {"rope_type", "rope_theta", ...}, or one such dict
//        per layer type ({"full_attention": {...}, "sliding_attention": {...}},
//        gemma3_text always); partial_rotary_factor inside the dict.
// Types the engine computes: default, linear, llama3 (phi3's su/yarn alias
// longrope). dynamic, yarn and longrope are kUnsupported naming the field
// ("rope_scaling.rope_type" / "rope_parameters.rope_type") and the value, as is
// any key of a rope dict that the type does not define. Values stated twice
// (top level and dict) must agree, else kInvalidInput naming both.
#pragma once

#include "qloom/model/architecture.h"
#include "qloom/model/config_reader.h"
#include "qloom/model/model_config.h"

namespace qloom::model {

struct RopeConfig {
  ModelConfig::Rope global;  // full-attention layers
  ModelConfig::Rope local;   // sliding-window layers
  double partial_rotary_factor = 1.0;
};

// `max_position_embeddings` is the config's (0 when absent): the default of
// original_max_position_embeddings, as transformers 5 takes it.
RopeConfig parse_rope_config(const ConfigReader& r, const Architecture& a, int64_t max_position_embeddings);

}  // namespace qloom::model
