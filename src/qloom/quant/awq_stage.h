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
// Per decoder layer, as Quark's AwqProcessor (awq/awq.py) does per block:
//   for each scaling group in forward order that fold_blocker
//   (quant/layer_fold.h) allows and the config selects:
//     one pass over the calibration samples with the layer's current float
//       weights: mean |x| per channel at the group's input, and the output
//       of the inspected block (self_attn -> o_proj's output, mlp -> down_proj's,
//       a single linear -> its own) as the reference
//     the grid search (awq_search_scales_pruned, the result of
//       awq_search_scales): for each ratio, the group's linears replaced by
//       Q(W·s)/s, the samples run again, loss = MSE of the inspected output
//       against the reference (r = 0 is plain RTN, so the chosen scales
//       never lose to it on this loss). A group in the attention half runs
//       the attention half only; a feed-forward group (every reader an
//       MLP / MoE linear) runs the feed-forward half alone on the layer's
//       first-half output, kept once per layer (LayerPart::kFirstHalf /
//       kFeedForward; as large as the held inputs, kept within
//       direct_loss_bytes); a group that inspects its only linear (v_proj ->
//       o_proj, up_proj -> down_proj, each MoE expert's up -> down) sums the
//       Gram matrix of that linear's inputs in the reference pass and scores
//       each candidate from it (quant/awq_gram_loss.h; 12 x in^2 bytes, within
//       direct_loss_bytes), else keeps the inputs (within direct_loss_bytes)
//       and evaluates the candidates on them, else re-runs the layer.
//       The loss is summed in parts (quant/awq_group_loss.h): one sample
//       each, or, where every token's error is its own (feed-forward and
//       single-linear groups), blocks of 128 tokens in decreasing order of
//       the reference output's norm; a grid point is dropped once its
//       partial sum passes the best total, the search starts from the ratio
//       the previous layer chose for the same kind of group. Measured on
//       SmolLM2-135M (64 c4 samples, 13,978 tokens, int4 g64, 1 thread, CPU
//       seconds per layer): 25 s (every candidate a whole layer pass) -> 18
//       (feed-forward half alone) -> ~12 (pruned, token parts), the same
//       scales bit for bit (bench/awq_layer_bench digests)
//     the best scales folded into the layer (fold_into_layer)
//   then, with clip, the clip search (awq_search_clip) for every linear
//   still to be quantized except q/k (awq_clip_applies), on the folded
//   weight and the inputs it now sees (a token subsample, Quark's
//   n_sample_token rule, collected in one pass), applied to the float weight.
// The stage quantizes nothing: the later stages (gptq) or the pipeline's RTN
// quantize the folded, clipped weights, as Quark quantizes after AWQ.
//
// Differences from Quark, by design of the pipeline: a layer's calibration
// inputs come from the earlier layers as exported (quantized), where Quark's
// AWQ passes float activations on (amd-quark 0.13 awq.py: one float pass of
// the unscaled layer caches every linear's input and gives the next layer's
// inputs); qloom folds each group's scales before the next group's search,
// where Quark searches every group of a layer on the unscaled layer and
// applies all scales together (its clip search then reads the cached inputs
// divided by the scales); groups Quark's maps list but qloom cannot
// fold exactly are skipped with a warning (GQA v_proj -> o_proj, MoE routers:
// quant/layer_fold.h); mean |x| and the loss are accumulated in double.
// MoE experts that received no calibration token (expert_out groups): not
// scaled and not clipped (counted in PipelineSummary::unscaled_groups, one
// warning per layer); their linears are quantized as they are.
// Memory: the inspected block's reference output (tokens x hidden fp32, as
// much as the held activations; twice that while token parts hold its
// permuted copy), the kept first-half output and, for token parts, its
// permuted copy (each as much as the held activations), one candidate per
// linear of the group (fp32), a single-linear group's inputs (at most
// direct_loss_bytes, twice while permuted), and for the clip search at most
// 2 x clip_max_tokens input rows per distinct linear input.
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
  // qloom only: most bytes of inputs a single-linear group keeps to evaluate
  // candidates directly (0: always re-run the layer, the reference path).
  uint64_t direct_loss_bytes = uint64_t{1} << 30;

  // Strict: null takes the defaults; null values are ignored. Unknown keys,
  // wrong types, name other than "awq" and out-of-range values throw kUsage
  // naming the key ("algo_config.awq.<key>"); another model_decoder_layers
  // kUnsupported.
  static AwqStageConfig from_json(const nlohmann::json& j);
};

std::unique_ptr<AlgorithmStage> make_awq_stage(const AwqStageConfig& config);

}  // namespace qloom::quant
