// Gated MLP: down(act(gate(x)) * up(x)); phi3 uses one fused gate_up_proj
// whose output rows are [gate | up].
#pragma once

#include <cstdint>

#include "qloom/engine/activations.h"
#include "qloom/engine/forward_context.h"
#include "qloom/engine/layer_weights.h"

namespace qloom::engine {

// h [rows, hidden] -> out [rows, hidden] (overwritten): mlp_inner, then
// down_proj on its result.
void mlp_block(ForwardContext& ctx, int layer, const MlpWeights& w, Activation act, const float* h,
               int64_t rows, float* out);

// down_proj's input: act(gate(h)) * up(h) -> mid [rows, intermediate].
void mlp_inner(ForwardContext& ctx, int layer, const MlpWeights& w, Activation act, const float* h, int64_t rows,
               float* mid);

}  // namespace qloom::engine
