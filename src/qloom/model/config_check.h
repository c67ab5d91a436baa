// validate_config: the one check of config.json's values that every command
// runs before it uses a model (issue 30 item 7) — quantize on every scheme
// and algorithm, convert, inspect, eval, validate, serve, perf and run.
// ModelConfig::parse runs it first, so the engine's paths get it too; the
// paths that never parse for the engine (RTN, inspect, convert, validate,
// agent intake) call it themselves. It is independent of model_type: a
// checkpoint qloom's engine cannot run (RTN only) is checked the same way.
//
// Checked, at the top level and in a nested "text_config" (values that are
// absent or null are not checked; ModelConfig::parse decides what is
// required):
//   - integers must be JSON integers. 64.0 is a float in JSON, and
//     transformers would keep it a float (nn.Linear / range() then fail), so
//     it is rejected like "64" and 64.5;
//   - counts and sizes within [min, max] (config_int_limits() below): positive
//     sizes, upper bounds so that nothing allocates absurd memory;
//   - floats finite and in range: rope_theta > 0, rms_norm_eps in (0, 1], ...;
//   - booleans and model_type of the right type;
//   - num_attention_heads divides hidden_size unless head_dim is given (or
//     the architecture defines a default head_dim), num_key_value_heads
//     divides num_attention_heads, num_experts_per_tok <= the experts;
//   - rope_scaling / rope_parameters: an object or null (per layer type
//     entries too), their numbers finite, positive and bounded, their
//     rope_type / type strings.
// Throws kInvalidInput with file = `source`, item = the field ("text_config."
// or "rope_scaling." prefixed), and a message naming the value, e.g.
//   config field "hidden_size" = "64" must be an integer
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace qloom::model {

// One bounded integer field.
struct IntLimit {
  const char* key;
  int64_t min;
  int64_t max;
};

// The integer limits validate_config applies (for docs and tests).
const std::vector<IntLimit>& config_int_limits();

void validate_config(const nlohmann::json& config, const std::string& source);

}  // namespace qloom::model
