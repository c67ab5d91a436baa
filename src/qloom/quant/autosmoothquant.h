// AutoSmoothQuant: SmoothQuant's per-channel migration of activation
// outliers into the weights, with the migration strength searched per
// scaling group instead of fixed, as pure functions (the pipeline stage is
// quant/autosmoothquant_stage.h). Following Quark (amd-quark 0.13,
// quark/torch/algorithm/awq/auto_smooth.py AutoSmoothQuantProcessor):
//   x_max_j = max over calibration tokens of |x_j| at the group's input
//   for i in 0 .. n_grid-1 (n_grid 10):  r = i / n_grid
//     s = max(x_max^r, 1e-4);  s = s / sqrt(max(s) * min(s))
//     the group's linears become Q_w(W · diag(s)) and their (shared) input
//     Q_in(x / s), where Q_in is the linears' input quantizer (none for a
//     weight-only scheme), observed afresh on x / s for a static spec;
//     loss_i = mean over the inspected block's output of |y_i - y|^p
//              (compute_scale_loss: MSE p = 2, MAE p = 1, RMSE p = 0.5)
//   keep the first minimum; r = 0 is s = 1 (no smoothing), so the chosen
//   scales never lose to plain quantization on this loss.
// Unlike AWQ (quant/awq.h) the statistic is the max, not the mean, the
// activations are quantized while the search runs, and nothing is clipped:
// the method is meant for schemes that quantize activations (W8A8 int8 /
// fp8), where the outlier channels of x decide the activation scale.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/core/dtype.h"
#include "qloom/quant/fake_quant.h"
#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

// Quark's compute_scale_loss.
enum class ScaleLoss { kMse, kMae, kRmse };

// "MSE" / "MAE" / "RMSE" (Quark's spelling, upper case); throws
// Error(kUsage, "", item, ...) for anything else.
ScaleLoss parse_scale_loss(const nlohmann::json& v, const std::string& item);
std::string scale_loss_name(ScaleLoss l);
// The exponent p of |e|^p: 2, 1, 0.5.
double scale_loss_power(ScaleLoss l);
// Quark's AUTOSMOOTHQUANT_MAP default for a model type: MAE for llama,
// mixtral, llama4, deepseek_v2/v3, hunyuan_v1_dense, granitemoehybrid and
// qwen3_5_moe; MSE (the dataclass default) for the others.
ScaleLoss default_scale_loss(std::string_view model_type);

// s for ratio r from x_max (finite, >= 0): computed in double, rounded once
// to f32. Throws Error(kInvalidInput) for an empty, negative or non-finite
// x_max.
std::vector<float> autosmooth_scales(std::span<const float> x_max, double ratio);

// How the group's input is quantized while a candidate runs.
struct SmoothInputQuant {
  const QuantSpec* spec = nullptr;          // null: the input is not quantized
  std::optional<StaticQParams> qparams;     // static specs: the scale observed on x / s
};

// The static per-tensor input scale Quark's observer computes on x / s:
// amax = max_j(x_max_j / s_j), then static_scale_from_amax.
StaticQParams autosmooth_static_qparams(std::span<const float> x_max, std::span<const float> s, const QuantSpec& spec,
                                        DType scale_dtype, DType model_dtype);

// In place: x <- s ⊙ Q_in(x / s) for x [rows, cols] (cols = s.size()), so
// that a candidate held as Q_w(W·s) / s computes Q_w(W·s) · Q_in(x / s).
// With no input spec, x is left as it is.
void smooth_quantize_input(float* x, int64_t rows, int64_t cols, std::span<const float> s,
                           const SmoothInputQuant& q);

// Σ |y_i - ref_i|^p over n values, in double (NaN propagates).
double scale_loss_sum(const float* y, const float* ref, size_t n, double p);

}  // namespace qloom::quant
