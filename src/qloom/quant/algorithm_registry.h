// The calibrated algorithms `qloom quantize --quant_algo` accepts, by
// Quark's names: awq (quant/awq_stage.h), gptq (quant/gptq_stage.h),
// gptaq (quant/gptaq_stage.h), qronos (quant/qronos_stage.h), smoothquant
// (quant/smoothquant_stage.h). Quark applies a list of
// algorithms in the order given, any combination (e.g. smoothquant,gptq or
// awq,gptq; torch/algorithm/api.py apply_advanced_quant_algo); qloom runs
// them in that order on each layer. A name Quark knows whose stage qloom has
// not implemented yet is refused with kUnsupported naming it; an unknown
// name with kUsage listing the known ones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/quant/algorithm_stage.h"

namespace qloom::quant {

// Builds the stage `name` from its config dict (null: the defaults for
// `model_type`, e.g. SmoothQuant's alpha). Throws as above, or what the stage's strict config parser
// throws (unknown keys are errors).
std::unique_ptr<AlgorithmStage> make_algorithm_stage(const std::string& name, const nlohmann::json& config,
                                                     const std::string& model_type);

// "gptq" or "smoothquant,gptq" (Quark's comma-separated --quant_algo) ->
// the names in order; kUsage for an empty entry or a repeated name.
std::vector<std::string> split_quant_algo(const std::string& quant_algo);

// Names with a stage in this build.
std::vector<std::string> implemented_algorithms();

}  // namespace qloom::quant
