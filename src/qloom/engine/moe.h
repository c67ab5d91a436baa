// Sparse MoE block (mixtral, qwen2_moe, qwen3_moe): router linear -> softmax
// (fp32) -> top-k experts per row (renormalized when norm_topk_prob; always
// for mixtral) -> each expert's gated MLP on only the rows routed to it
// (hooks see those rows) -> weighted sum; qwen2_moe adds
// sigmoid(shared_expert_gate(x)) * shared_expert(x).
#pragma once

#include <cstdint>

#include "qloom/engine/activations.h"
#include "qloom/engine/forward_context.h"
#include "qloom/engine/layer_weights.h"

namespace qloom::engine {

struct MoeShape {
  int64_t top_k = 2;
  bool norm_topk_prob = true;
};

// h [rows, hidden] -> out [rows, hidden] (overwritten).
void moe_block(ForwardContext& ctx, int layer, const MoeShape& s, const MoeWeights& w,
               Activation act, const float* h, int64_t rows, float* out);

}  // namespace qloom::engine
