// The AWQ stage of the calibration pipeline (algorithm_stage.h), configured
// as Quark's AWQConfig (quark/torch/quantization/config/config.py, amd-quark
// 0.12.post1): keys name ("awq"), scaling_layers (quant/scaling_layers_config.h;
// empty or absent: every scaling group qloom knows for the architecture,
// quant/layer_groups.h), model_decoder_layers ("model.layers"; "" = the
// same). algo_config() writes exactly these keys in this order
// (AWQConfig.to_dict()), scaling_layers = the groups actually folded (the
// union over layers, Quark's entry form), so validators know which norms /
// producer linears changed and which linears carry the scales.
// qloom-only keys, accepted on input and never written (Quark rebuilds the
// dataclass with AWQConfig(**d), which would reject them): n_grid (20),
// duo_scaling (false), clip (true), max_shrink (0.5), clip_n_grid (20),
// clip_max_tokens (512) — the search parameters of quant/awq.h — and
// direct_loss_bytes (1 GiB, see below).
//
// Per decoder layer, in the order of Quark's AwqProcessor (amd-quark 0.13
// awq/awq.py), for the scaling groups fold_blocker (quant/layer_fold.h)
// allows and the config selects:
//   1. one reference pass over the calibration samples with the layer's
//      unscaled float weights (AwqReferenceCollector, quant/awq_group_loss.h),
//      every group's hooks at once: mean |x| per channel at each group's
//      input; the output of each inspected block (self_attn -> o_proj's,
//      mlp -> down_proj's) per sample; for a group that inspects its only
//      linear (v_proj -> o_proj, up_proj -> down_proj, each MoE expert's
//      up -> down) the Gram matrix of that linear's inputs (12 x in^2 bytes,
//      within direct_loss_bytes; else the inputs themselves, within
//      direct_loss_bytes; else nothing: its candidates re-run the layer);
//      the first-half output (LayerPart::kFirstHalf, as large as the held
//      inputs, kept within direct_loss_bytes) when a feed-forward group can
//      use it; and the clip search's token subsample of every input to be
//      clipped (Quark's n_sample_token rule).
//   2. every group's grid search on that unscaled layer
//      (awq_search_scales_pruned, the result of awq_search_scales): for each
//      ratio the group's linears replaced by Q(W·s)/s, loss = MSE of the
//      inspected output against the reference (r = 0 is plain RTN, so the
//      chosen scales never lose to it on this loss). An attention-half group
//      re-runs the attention half per sample; a feed-forward group (every
//      reader an MLP / MoE linear) runs the feed-forward half alone on the
//      kept first-half output; a single-linear group is scored from its
//      Gram matrix (quant/awq_gram_loss.h: one [out, in] x [in, in] product
//      per point) or its kept inputs. The loss is summed in parts: one
//      sample each, or, where every token's error is its own, blocks of 128
//      tokens in decreasing order of the reference output's norm (Gram
//      form: blocks of 128 output rows); a grid point is dropped once its
//      partial sum passes the best total, and the search starts from the
//      ratio the previous layer chose for the same kind of group.
//   3. all groups' scales folded in forward order (fold_into_layer).
//   4. with clip, the clip search (awq_search_clip) for every linear still
//      to be quantized except q/k (awq_clip_applies), on the folded weight
//      and the cached inputs divided by the scales folded into their readers
//      (an MoE expert's input, which saw fewer rows than the pass assumed, is
//      collected again from the folded layer), applied to the float weight.
// Measured on SmolLM2-135M (64 c4 samples, 13,978 tokens, int4 g64, 1
// thread, bench/awq_layer_bench, seconds per layer for layers 0-2): 25
// (every candidate a whole layer pass) -> 18 (feed-forward half alone) ->
// ~12 (pruned, token parts) -> 10.8 (Gram form) -> 9.6 (one reference pass,
// Quark's order) -> 7.9 (prepacked candidates, vector exp, clip from Gram
// matrices, deeper GEMM blocks).
// The stage quantizes nothing: the later stages (gptq) or the pipeline's RTN
// quantize the folded, clipped weights, as Quark quantizes after AWQ.
//
// Differences from Quark, by design of the pipeline: a layer's calibration
// inputs come from the earlier layers as exported (quantized), where Quark's
// AWQ passes the unscaled float layer's outputs on; groups Quark's maps list
// but qloom cannot fold exactly are skipped with a warning (GQA v_proj ->
// o_proj, MoE routers: quant/layer_fold.h); mean |x| and the loss are
// accumulated in double.
// MoE experts that received no calibration token (expert_out groups): not
// scaled and not clipped (counted in PipelineSummary::unscaled_groups, one
// warning per layer); their linears are quantized as they are.
// Memory: every inspected block's reference output (tokens x hidden fp32
// each, as much as the held activations; twice that while token parts hold
// a permuted copy), the kept first-half output and, for token parts, its
// permuted copy (each as much as the held activations), the Gram matrices
// (or kept inputs, at most direct_loss_bytes each), one candidate per linear
// of the group searched (fp32, and its packed copy), and for the clip search
// at most 2 x clip_max_tokens input rows per distinct linear input.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/quant/algorithm_stage.h"
#include "qloom/quant/awq.h"
#include "qloom/quant/scaling_layers_config.h"

namespace qloom::quant {

struct AwqStageConfig {
  std::vector<ScalingLayerEntry> scaling_layers;  // empty: every group qloom knows
  std::string model_decoder_layers = "model.layers";
  AwqConfig search;  // qloom only (not written)
  // qloom only: most bytes a single-linear group's Gram matrix (12 x in^2)
  // or kept inputs, and the kept first-half output, may take (0: every
  // candidate re-runs the layer, the reference path).
  uint64_t direct_loss_bytes = uint64_t{1} << 30;

  // Strict: null takes the defaults; null values are ignored. Unknown keys,
  // wrong types, name other than "awq" and out-of-range values throw kUsage
  // naming the key ("algo_config.awq.<key>"); another model_decoder_layers
  // kUnsupported.
  static AwqStageConfig from_json(const nlohmann::json& j);
};

std::unique_ptr<AlgorithmStage> make_awq_stage(const AwqStageConfig& config);

}  // namespace qloom::quant
