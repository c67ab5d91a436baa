// Shared global scales of parallel linears (Quark's shared_scale_groups): for
// nvfp4, amd-quark 0.13's LLMTemplate.get_config defaults to
// [["q_proj", "k_proj", "v_proj"], gate_up_layers_name]
// (_get_default_shared_scale_settings; gate_up_layers_name is
// ["gate_proj", "up_proj"] except dbrx ["w1", "v1"], grok-1
// ["linear", "linear_v"], minimax_m2 ["w1", "w3"]), and every other scheme
// to none. Quark then makes the per-tensor (second-stage) observers of the
// siblings that match one group share one observer
// (model_transformation.py build_shared_layer_mapping /
// share_observers_for_parallel_layers): their global scales come from the
// max over all of them, so q/k/v (and gate/up) of one block get the same
// weight_scale_2 and input_scale_2, which is what vLLM's QuarkNVFP4 expects
// of fused q/k/v and gate/up shards.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qloom::quant {

using SharedScaleGroups = std::vector<std::vector<std::string>>;

// The default groups of `scheme` (a --quant_scheme name) for `model_type`.
SharedScaleGroups default_shared_scale_groups(std::string_view scheme, std::string_view model_type);

// The modules of `candidates` that share `module`'s global scale, `module`
// included, in candidates order: siblings (same parent path) whose last
// name component ends with a suffix of the group that matches `module`.
// Just {module} when no group matches or no sibling is a candidate.
std::vector<std::string> shared_scale_members(const std::string& module, const std::vector<std::string>& candidates,
                                              const SharedScaleGroups& groups);

}  // namespace qloom::quant
