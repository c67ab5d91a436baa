// AWQ (Lin et al. 2024): activation-aware per-channel scales for one scaling
// group (quant/layer_groups.h), as pure functions. The caller (the layer
// pipeline) collects the statistics through engine::ForwardHooks, runs the
// inspected block inside the loss callback, folds the chosen scales with
// quant/smoothing.h and quantizes.
//
// Scale search (awq_search_scales), following Quark (amd-quark wheel,
// quark/torch/algorithm/awq/awq.py AwqProcessor._compute_best_scale), which
// follows AutoAWQ:
//   x_mean_j = mean over calibration tokens of |x_j| at the group's input
//   for i in 0 .. n_grid-1:  r = i / n_grid
//     s = max(x_mean^r, 1e-4)                                (duo_scaling off)
//     s = max(x_mean^r / (w_mean^(1-r) + 1e-4), 1e-4)         (duo_scaling on)
//     s = s / sqrt(max(s) * min(s)); inf / NaN entries -> 1
//     candidate W'_m = Q(W_m · diag(s)) · diag(s)^-1 for every quantized linear
//     loss_i = loss(candidates)           (caller: MSE of the inspected block's
//                                          output vs its float output)
//   keep the first strict minimum (loss < best); r = 0 (s = 1) is plain RTN,
//   so the best loss is never above RTN's.
// w_mean (duo scaling only; llm-compressor modifiers/awq/base.py): |W|
// divided by its quantization group's max |W| + 1e-6, averaged over all rows
// of all the group's linears, per input channel. duo_scaling defaults to
// false as in Quark (which computes w_mean but never uses it); AutoAWQ and
// llm-compressor default to true.
// Q: quantize_weight + dequantize (quant/quantize_fast.h, Quark's exact RTN)
// with the linear's spec; W · diag(s) is rounded to model_dtype first (a bf16
// torch model holds it in bf16); the division by s is fp32.
//
// Clip search (awq_search_clip), AutoAWQ's auto_clip as Quark runs it
// (_compute_best_clip: n_grid 20, max_shrink 0.5, n_sample_token 512): on the
// weight with the scales folded in and the inputs it then sees (x / s):
//   tokens: T' = every step-th token from 0, step = T / min(T, max_tokens)
//   per output channel o and quantization group g: m0 = max |W[o, g]|;
//   for i in 0 .. int(max_shrink * n_grid)-1 (i.e. shrink factors
//     1, 0.95, ..., 0.55 with the defaults):
//     m = m0 * (1 - i / n_grid); err = mean_t (x_t[g] · (Q(clamp(W, -m, m)) - W)[o, g])^2
//     (evaluated as Δ H_g Δᵀ / T' from each group's input Gram matrix H_g)
//   keep the first strict minimum; the clamp is then applied to W before the
//   final quantization (apply_awq_clip). i = 0 is no clipping, so the
//   objective never increases. Per-group and per-channel specs only (their
//   groups quantize independently); per-tensor specs return an empty result.
// Quark skips clipping for modules named like "q_", "k_", "query", "key",
// "Wqkv" (the q·k product makes clipping imprecise); awq_clip_applies keeps
// the intent: not for q_proj, k_proj, or a fused qkv_proj.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"
#include "qloom/engine/gemm.h"
#include "qloom/model/model_config.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

struct AwqConfig {
  int n_grid = 20;          // grid points over the exponent r in [0, 1)
  bool duo_scaling = false; // also divide by w_mean^(1-r) (llm-compressor / AutoAWQ)
  bool clip = true;         // run the clip search (Quark always does)
  double max_shrink = 0.5;  // clip candidates down to (1 - max_shrink) of the max, exclusive
  int clip_n_grid = 20;     // clip grid: shrink step 1 / clip_n_grid
  int clip_max_tokens = 512;  // token subsample of the clip search (n_sample_token)

  // Defaults overridden by the keys of `j` ("n_grid", "duo_scaling", "clip",
  // "max_shrink", "clip_n_grid", "clip_max_tokens"; null = defaults). Throws
  // Error(kUsage, "", "<key>", ...) for unknown keys (naming the known ones),
  // wrong JSON types and out-of-range values (n_grid 1..1000, max_shrink in
  // [0, 1), clip_n_grid 1..1000, clip_max_tokens >= 1).
  static AwqConfig from_json(const nlohmann::json& j);

  // Quark's AWQConfig dict (dataclasses.asdict) for
  // quantization_config.algo_config: {"name": "awq", "scaling_layers": quark_scaling_layers(config),
  // "model_decoder_layers": "model.layers"}. Quark rebuilds the dataclass from
  // this dict with AWQConfig(**d), so any extra key would make the checkpoint
  // unloadable in Quark: qloom's own parameters go to params_json() instead.
  // (The pipeline's AWQ stage, awq_stage.h, writes the groups it actually
  // folded, in Quark's key order, rather than every applicable group.)
  nlohmann::json to_json(const model::ModelConfig& config) const;
  // qloom's parameters ({"n_grid", "duo_scaling", "clip", "max_shrink",
  // "clip_n_grid", "clip_max_tokens"}), for reports; from_json accepts it.
  nlohmann::json params_json() const;
};

// How Q rounds: quantize_weight's scale / model dtypes and thread count.
struct AwqQuantOptions {
  DType scale_dtype = DType::kF32;
  DType model_dtype = DType::kF32;
  unsigned threads = 0;  // 0 = hardware concurrency
};

struct AwqLinear {
  std::string name;                            // module name (candidate map key, errors)
  const engine::LinearWeight* weight = nullptr;  // original weight (F32 or BF16), bias kept
  const QuantSpec* spec = nullptr;             // its weight spec; null = not quantized
};

// Candidate weights by module name: F32, [out, in], with the original bias.
// Holds every linear with a spec; the callback uses the original weight for
// any module not in it.
using AwqCandidates = std::map<std::string, engine::LinearWeight>;
// Must return the loss (MSE of the inspected module's output) with the
// candidates in place; a non-finite value excludes that grid point.
using AwqLossFn = std::function<double(const AwqCandidates&)>;

struct AwqScaleResult {
  std::vector<float> scales;  // best s, length = channels
  double ratio = 0.0;         // its r
  double loss = 0.0;          // its loss
  std::vector<double> losses; // loss per grid point (losses[0]: r = 0, plain RTN)
};

// The scale search above. x_mean: per input channel mean |x| (finite, >= 0).
// Throws Error(kUsage) for no linears / mismatched shapes / no quantized
// linear, Error(kInvalidInput) for a bad x_mean or when every grid point's
// loss is non-finite, and what quantize_weight throws.
AwqScaleResult awq_search_scales(std::span<const float> x_mean, const std::vector<AwqLinear>& linears,
                                 const AwqConfig& config, const AwqQuantOptions& options,
                                 const AwqLossFn& loss);

// The loss of awq_search_scales_pruned, in parts (e.g. one calibration sample
// each): the MSE is (sum over parts of part_se) / count().
class AwqPartLoss {
 public:
  virtual ~AwqPartLoss() = default;
  virtual int64_t parts() const = 0;
  virtual double count() const = 0;  // elements of the whole loss (its divisor), > 0
  // Puts the candidates in place for the part_se calls until end() (they
  // stay alive until then).
  virtual void begin(const AwqCandidates& candidates) = 0;
  // Sum of squared errors of part p (any order, any subset; NaN: excluded).
  virtual double part_se(int64_t p) = 0;
  virtual void end() = 0;
};

// The same search as awq_search_scales, with the same result (the first
// strict minimum of loss_i = (sum_p se_i,p) / count, the parts summed in
// index order), evaluated with fewer parts: the points are visited from
// `first` outward (first, first + 1, first - 1, ...), the parts in
// decreasing order of the first completed point's part errors, and a point
// is dropped as soon as its partial sum exceeds the best total so far (with
// a relative margin of 1e-12, far above the rounding of a reordered sum): a
// sum of non-negative terms only grows, so a dropped point cannot be the
// minimum. losses[i] is NaN for dropped points. Errors as awq_search_scales.
AwqScaleResult awq_search_scales_pruned(std::span<const float> x_mean, const std::vector<AwqLinear>& linears,
                                        const AwqConfig& config, const AwqQuantOptions& options, AwqPartLoss& loss,
                                        int first = 0);

// The candidate weight Q(W · diag(s)) · diag(s)^-1 of one linear (F32, bias
// kept); exposed for callers and tests.
engine::LinearWeight awq_candidate(const engine::LinearWeight& w, const QuantSpec& spec,
                                   std::span<const float> s, const AwqQuantOptions& options,
                                   std::string_view name);

struct AwqClip {
  int64_t rows = 0, groups_per_row = 0, group_size = 0;
  std::vector<float> max_val;  // [rows, groups_per_row] clamp bounds; empty = no clip
  double loss_before = 0.0;    // objective summed over (row, group), unclipped (i = 0)
  double loss_after = 0.0;     // the same at the chosen bounds (<= loss_before)
};

// The clip search above. w: the weight as it will be quantized (scales
// folded in); x: [tokens, w.in] row-major, the inputs it then sees.
// Throws Error(kUsage) for mismatched shapes or a bad token count, and what
// quantize_weight throws.
AwqClip awq_search_clip(const engine::LinearWeight& w, const QuantSpec& spec, std::span<const float> x,
                        int64_t tokens, const AwqConfig& config, const AwqQuantOptions& options,
                        std::string_view name);

// W[o, g] = clamp(W[o, g], -max_val, max_val); no-op for an empty clip.
// BF16 weights keep bf16 values (a clamp to a bound rounded to bf16).
void apply_awq_clip(engine::LinearWeight& w, const AwqClip& clip);

// False for q_proj, k_proj and fused qkv_proj modules (see above).
bool awq_clip_applies(std::string_view module);

}  // namespace qloom::quant
