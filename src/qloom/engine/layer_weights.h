// The weights the engine holds for one model, as loaded by weight_loader.cpp.
// Linear layers keep their checkpoint name (minus ".weight") for the hooks.
// Norm weights are fp32 with Gemma's (1 + w) already folded in.
#pragma once

#include <vector>

#include "qloom/engine/forward_context.h"

namespace qloom::engine {

struct AttentionWeights {
  NamedLinear q, k, v;   // separate projections, or
  NamedLinear qkv;       // phi3's fused [q; k; v] (q.name empty then)
  NamedLinear o;
  std::vector<float> q_norm, k_norm;  // [head_dim] when the arch has qk norm
};

struct MlpWeights {
  NamedLinear gate, up;  // separate, or
  NamedLinear gate_up;   // phi3's fused [gate; up] (gate.name empty then)
  NamedLinear down;
};

struct MoeWeights {
  NamedLinear router;                // [num_experts, hidden]
  std::vector<MlpWeights> experts;
  bool has_shared = false;           // qwen2_moe
  MlpWeights shared;
  NamedLinear shared_gate;           // [1, hidden], sigmoid-gated
};

struct LayerWeights {
  std::vector<float> input_norm;
  std::vector<float> post_attention_norm;  // pre-MLP norm; gemma2/3: on the attention output
  std::vector<float> pre_ff_norm, post_ff_norm;  // gemma2/3 only
  AttentionWeights attn;
  bool is_moe = false;
  MlpWeights mlp;
  MoeWeights moe;
  size_t bytes() const;
};

struct ModelWeights {
  NamedLinear embed;  // [vocab, hidden]; F32 or BF16 like the linears
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;
  NamedLinear lm_head;  // empty weights when tied (embed is used, named "lm_head")
  // The embedding serves as lm_head: tie_word_embeddings and no lm_head.weight
  // in the checkpoint (one that has its own, e.g. a rotated model, is untied,
  // as transformers 5 unties it).
  bool tied_head = false;
  size_t bytes() const;
};

}  // namespace qloom::engine
