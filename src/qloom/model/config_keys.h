// Which config.json keys the engine knows, per model_type.
//
// Policy (issue 12): a config field that changes the maths and that qloom
// does not understand is an error naming the field, never a default. Every
// key of config.json is looked up in two explicit lists per architecture:
//   - interpreted: read by ModelConfig::parse (sizes, norms, RoPE, windows,
//     activations, softcapping, biases, MoE routing ...), each value checked;
//   - ignored: known to be harmless for an inference forward pass — metadata
//     (architectures, transformers_version, dtype ...), generation defaults,
//     training-only knobs (dropouts, router aux loss, jitter noise),
//     keys transformers itself does not read for this architecture.
// A key in neither list whose name suggests maths (rope*, *scal*, *norm*,
// *window*, *head*, *act*, *softcap*, *eps*, *bias*, *partial*, *theta*,
// *freq*, *expert*, *factor*, *logit*, *dim*, *attn*, *attention*, *embed*,
// *layer*, *rotary*, *position*, *moe*, *router*, *mlp*, *multiplier*,
// *sparse*, *clip* ...) is kUnsupported naming the field; another unknown key
// (e.g. a tool's own metadata) is not read.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qloom::model {

// True when `key` is interpreted or known-ignored for `model_type`.
bool config_key_known(std::string_view model_type, std::string_view key);
// True when an unknown key's name suggests it changes the maths.
bool key_suggests_maths(std::string_view key);
// Throws kUnsupported naming the first key of `config` (an object) that is
// unknown for `model_type` and suggests maths. `path` prefixes the field
// ("text_config." for a nested text config).
void check_config_keys(const nlohmann::json& config, std::string_view model_type, const std::string& source,
                       const std::string& path = "");

}  // namespace qloom::model
