// Scaling groups of a decoder layer: the places where a per-channel scale s
// can be folded away exactly, for AWQ and SmoothQuant. A group is an
// operation whose output channels feed a set of linears (prev_op: an RMSNorm
// weight, or the rows of a linear), so that
//     prev_op' = prev_op / s   and   W' = W · diag(s)   for every reader
// leave the model's function unchanged (quant/smoothing.h does the folding).
//
// Per architecture (module names relative to "model.layers.<i>."):
//   llama, mistral, qwen2, qwen3, gemma:
//     input_layernorm          -> self_attn.{q,k,v}_proj     inspect self_attn
//     self_attn.v_proj         -> self_attn.o_proj           inspect o_proj  (MHA only)
//     post_attention_layernorm -> mlp.{gate,up}_proj         inspect mlp
//     mlp.up_proj              -> mlp.down_proj              inspect down_proj
//   gemma2, gemma3_text: as above, but the MLP's norm is pre_feedforward_layernorm
//     (post_attention_layernorm normalizes the attention output there).
//   phi3 (fused): input_layernorm -> self_attn.qkv_proj; the v rows of qkv_proj
//     (offset q_dim + kv_dim) -> o_proj (MHA only); post_attention_layernorm ->
//     mlp.gate_up_proj; the up rows of gate_up_proj (offset I) -> mlp.down_proj.
//   mixtral: attention groups as llama; post_attention_layernorm -> every
//     block_sparse_moe.experts.<e>.{w1,w3}, the router block_sparse_moe.gate as a
//     fold-only reader, inspect block_sparse_moe; per expert w3 -> w2.
//   qwen2_moe / qwen3_moe (sparse layers): post_attention_layernorm -> every
//     mlp.experts.<e>.{gate,up}_proj (+ mlp.shared_expert.{gate,up}_proj), the
//     router mlp.gate (+ mlp.shared_expert_gate) fold-only, inspect mlp; per
//     expert (and shared expert) up_proj -> down_proj. Dense layers of these
//     models (mlp_only_layers) get the dense MLP groups.
//
// Sources (facts only, no code copied):
//   amd-quark wheel (version.py 0.12.post1, git 8f4c10e)
//     quark/torch/quantization/config/algo_configs.py AWQ_MAP / SQ_MAP: llama,
//     mistral, qwen2, phi3, gemma2, gemma3_text, gemma3 exactly the tables above
//     (gemma2/3 with pre_feedforward_layernorm; phi3 qkv_proj -> o_proj and
//     gate_up_proj -> down_proj). Quark's mixtral maps have the attention
//     groups only; qwen2_moe the attention groups plus experts.<i>.up_proj ->
//     down_proj (quark/torch/algorithm/utils/prepare.py: "moe gate/up_proj
//     cannot use AWQ/SQ/ASQ, because moe has the pattern:
//     post_attention_layernorm + (router, gate_proj, up_proj)"). Quark has no
//     map for qwen3, gemma, qwen3_moe (its LLMTemplate refuses them).
//   llm-compressor src/llmcompressor/modifiers/awq/mappings.py: the same dense
//     tables (Qwen3ForCausalLM = default, Gemma2/3 = pre_feedforward_layernorm,
//     Phi3 = fused), MoE: post_attention_layernorm -> experts' gate/up; and its
//     PR #2451 ("[AWQ] Update MoE mappings to include router in balance
//     layers": without it the router reads unscaled activations and routes
//     wrongly). qloom follows llm-compressor for MoE, with the routers (and
//     qwen2_moe's shared_expert_gate) as fold-only readers, which keeps the
//     fold exact; Quark's narrower MoE choice is a subset of these groups.
//   v_proj -> o_proj needs o_proj.in == v rows: AutoAWQ / llm-compressor skip
//     it under GQA (llm-compressor base.py, "exclude v_proj->o_proj mappings
//     whose shapes are incompatible"; for fused qkv_proj: out == 3 * o.in).
//     Quark instead ties the scales of the query heads sharing a KV head (max
//     over them, awq/scale.py scale_fc_fc); qloom follows AutoAWQ /
//     llm-compressor: applicable = false with the reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/model/model_config.h"

namespace qloom::quant {

enum class PrevKind { kNorm, kLinear };

struct ScalingGroup {
  // Short label: "attn_in", "attn_out", "mlp_in", "mlp_out", "expert_out",
  // "shared_out" (for logs and reports).
  std::string kind;
  PrevKind prev_kind = PrevKind::kNorm;
  // kNorm: the norm's checkpoint tensor ("model.layers.3.input_layernorm.weight");
  // kLinear: the module whose output rows feed the group ("model.layers.3.self_attn.v_proj").
  std::string prev_op;
  bool gemma_norm = false;      // kNorm: the stored weight w means (1 + w) (gemma family)
  int64_t prev_row_offset = 0;  // kLinear: first output row of prev_op feeding the group
  int64_t channels = 0;         // number of scaled channels = in_features of the readers
  // Quantized readers of the scaled channels: the group's AWQ / SmoothQuant
  // balance layers (checkpoint module names, no ".weight").
  std::vector<std::string> linears;
  // Readers that are not quantized by default (MoE routers, qwen2_moe's
  // shared_expert_gate): they get W · diag(s) too, so the fold stays exact,
  // but they take no part in the search statistics.
  std::vector<std::string> fold_only;
  // The module whose output AWQ's loss compares ("model.layers.3.self_attn",
  // "model.layers.3.mlp", "model.layers.3.block_sparse_moe", or a single linear).
  std::string inspect;
  // The linear whose ForwardHooks::linear_input sees the group's whole input
  // (every token): where callers collect mean |x| / max |x| and input samples.
  // For MoE expert groups it sees only the tokens routed to that expert.
  std::string input_site;
  bool applicable = true;
  std::string skip_reason;  // why not, when !applicable
};

// The groups of decoder layer `layer` (0 <= layer < num_layers) in forward
// order, including inapplicable ones (applicable = false, skip_reason set).
// Throws Error(kUnsupported) for a model_type the engine does not support,
// Error(kUsage) for a layer index out of range.
std::vector<ScalingGroup> layer_scaling_groups(const model::ModelConfig& config, int layer);

// Quark's scaling_layers list (AWQConfig / SmoothQuantConfig "scaling_layers")
// for what qloom does on this model: one entry per applicable group kind, names
// relative to the decoder layer, {"prev_op", "layers", "inp"[, "module2inspect"]},
// the union over all layers in first-seen order (MoE expert groups one per
// expert, as Quark lists them). Fold-only readers are not listed (Quark has no
// field for them).
nlohmann::json quark_scaling_layers(const model::ModelConfig& config);

}  // namespace qloom::quant
