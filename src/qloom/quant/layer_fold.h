// Folding a per-channel scale into one scaling group (quant/layer_groups.h)
// of the layer a LayerSession holds, for the AWQ and SmoothQuant stages:
// the producer (a norm, or rows of a linear, and its bias) is divided by s,
// every reader linear's columns multiplied by s (quant/smoothing.h), so the
// layer computes the same function; the changed unquantized tensors are
// reported with LayerSession::mark_modified (rounded to their checkpoint
// dtype, exported in place of the source's).
//
// Which groups a stage folds (fold_blocker): only those whose every changed
// tensor is accounted for in the checkpoint, i.e. each one is either
// quantized (a reader: its codes are derived from the folded weight) or the
// group's prev_op (listed in algo_config.scaling_layers, so Quark's config
// says it was changed and validators exempt it). Hence not:
//   - groups that are not applicable (e.g. v_proj -> o_proj under GQA);
//   - groups with fold-only readers (MoE routers, qwen2_moe's
//     shared_expert_gate): unquantized tensors Quark's scaling_layers format
//     cannot name. Quark's own MoE maps leave these groups out too
//     (algo_configs.py: mixtral attention groups only; qwen2_moe attention +
//     experts' up_proj -> down_proj);
//   - groups with a reader that is not quantized (--exclude_layers, or a
//     shape the scheme's layout cannot hold) or already quantized by an
//     earlier stage (e.g. gptq before awq);
//   - groups whose producer linear was already quantized by an earlier stage.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/layer_groups.h"
#include "qloom/quant/scaling_layers_config.h"

namespace qloom::quant {

// "" when a stage may fold into g now, else why not (for warnings).
std::string fold_blocker(LayerSession& s, const ScalingGroup& g);

// Folds `scales` (g.channels values, finite and > 0) into the loaded layer
// and marks the changed unquantized tensors. Throws what fold_scales throws
// (nothing is changed then) and what mark_modified throws.
void fold_into_layer(LayerSession& s, const ScalingGroup& g, std::span<const float> scales);

// The module whose output is g's inspected block's output: self_attn ->
// its o_proj, mlp -> its down_proj, a linear -> itself, as linears of the
// loaded layer. Empty for blocks without a single output linear (MoE blocks).
std::string inspect_output_module(engine::LayerRunner& runner, const ScalingGroup& g);

// The layer part a search must run to see `module`'s output: kAttention for
// an attention linear (stage 0 or 1 of the layer), else kFull.
engine::LayerPart inspect_part(engine::LayerRunner& runner, const std::string& module);

// True when folding g changes only weights of the feed-forward half (every
// reader and a producer linear are MLP / MoE linears; a producer norm read
// only by them is the feed-forward norm), so the attention half's output
// stays valid and a search may run the feed-forward half alone on it.
bool feed_forward_group(engine::LayerRunner& runner, const ScalingGroup& g);

// A scaling group a searching stage (AWQ, AutoSmoothQuant) covers in the
// loaded layer, and the scales its search chose.
struct SearchGroup {
  ScalingGroup g;
  ScalingLayerEntry entry;  // its Quark entry (algo_config.scaling_layers)
  std::string out_module;   // inspect_output_module
  engine::LayerPart part = engine::LayerPart::kFull;  // inspect_part(out_module)
  bool ff = false;          // a feed-forward group whose output is not an attention linear's
  std::vector<float> scales;  // empty: not scaled (no calibration token reached it)
};

// The groups of the loaded layer, in forward order, that `selected`
// accepts, fold_blocker allows and whose inspected block has a single output
// linear; the others that `selected` accepts are noted in `unscaled`.
std::vector<SearchGroup> plan_search_groups(
    LayerSession& s, const std::function<bool(const ScalingGroup&, const ScalingLayerEntry&)>& selected,
    UnscaledGroups& unscaled);

// Folds the groups' scales in order (fold_into_layer) and records them;
// groups without scales are counted as unscaled, with one warning for the
// layer naming `stage`.
void fold_search_groups(LayerSession& s, const std::string& stage, const std::vector<SearchGroup>& groups,
                        ScalingLayersRecord& record);

}  // namespace qloom::quant
