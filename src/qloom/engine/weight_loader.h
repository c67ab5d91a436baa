// load_weights: reads every tensor the forward pass needs from a
// WeightSource, by the checkpoint names of the architecture, checks shapes,
// converts linears (and the embedding) to the requested WeightType, norms to
// fp32, and releases each source tensor once copied.
//
// Weight types: LoadOptions::kAuto keeps BF16 checkpoints BF16 (embedding
// included: big vocabularies stay half size; rows are widened on lookup) and
// turns F32/F16 into F32; kF32 / kBF16 force the type (F16 -> BF16 goes
// through f32 and rounds).
// Errors: a missing tensor or a wrong shape throws kInvalidInput naming the
// tensor and the expected shape (file = `label`).
#pragma once

#include <string>
#include <vector>

#include "qloom/model/architecture.h"
#include "qloom/engine/layer_weights.h"
#include "qloom/engine/model.h"

namespace qloom::engine {

// compute: LoadOptions::compute (kBF16 puts every linear, lm_head included,
// on the native bf16 dot kernel; see model.h).
ModelWeights load_weights(const WeightSource& src, const model::ModelConfig& c, const model::Architecture& a,
                          LoadOptions::Weights mode, const std::string& label,
                          LoadOptions::Compute compute = LoadOptions::Compute::kF32);

// The parts load_weights is made of, for loading one decoder layer at a time
// (layer_runner.h): the token embedding, decoder layer `i`, the final norm.
NamedLinear load_embedding(const WeightSource& src, const model::ModelConfig& c, LoadOptions::Weights mode,
                           const std::string& label);
LayerWeights load_layer_weights(const WeightSource& src, const model::ModelConfig& c, const model::Architecture& a,
                                LoadOptions::Weights mode, const std::string& label, int64_t i,
                                LoadOptions::Compute compute = LoadOptions::Compute::kF32);
std::vector<float> load_final_norm(const WeightSource& src, const model::ModelConfig& c, const model::Architecture& a,
                                   const std::string& label);

}  // namespace qloom::engine
