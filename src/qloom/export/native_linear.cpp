#include "qloom/export/native_linear.h"

#include "qloom/core/error.h"

namespace qloom::exporter {
namespace {

using engine::QActFormat;
using engine::QWeightFormat;
using quant::QDtype;
using quant::QScheme;
using quant::QuantSpec;

// Weight format and scale group of a weight spec, or nullopt.
std::optional<std::pair<QWeightFormat, int64_t>> weight_format(const QuantSpec& w, int64_t in) {
  const int64_t group = w.qscheme == QScheme::kPerTensor    ? 0
                        : w.qscheme == QScheme::kPerChannel ? in
                                                            : w.group_size;
  switch (w.dtype) {
    case QDtype::kInt8:
      if (!w.symmetric || w.qscheme == QScheme::kPerGroup) return std::nullopt;
      return std::pair{QWeightFormat::kInt8, group};
    case QDtype::kFp8E4M3:
      if (w.qscheme == QScheme::kPerGroup) return std::nullopt;
      return std::pair{QWeightFormat::kFp8E4M3, group};
    case QDtype::kInt4:
      if (!w.symmetric || w.qscheme == QScheme::kPerTensor) return std::nullopt;
      return std::pair{QWeightFormat::kInt4, group};
    case QDtype::kUInt4:
      if (w.symmetric || w.qscheme == QScheme::kPerTensor) return std::nullopt;
      return std::pair{QWeightFormat::kUInt4, group};
    case QDtype::kFp4:
      if (w.qscheme != QScheme::kPerGroup || w.group_size != 32 || w.scale_format != quant::ScaleFormat::kE8M0)
        return std::nullopt;
      return std::pair{QWeightFormat::kMxfp4, group};
    default: return std::nullopt;
  }
}

// Activation format of an input spec for a weight format, or nullopt.
std::optional<QActFormat> act_format(const std::optional<QuantSpec>& in, QWeightFormat w) {
  if (!in) {
    const bool weight_only = w == QWeightFormat::kInt4 || w == QWeightFormat::kUInt4 || w == QWeightFormat::kMxfp4;
    return weight_only ? std::optional{QActFormat::kF32} : std::nullopt;
  }
  const bool per_tensor = in->qscheme == QScheme::kPerTensor && !in->is_dynamic;
  const bool per_token = in->qscheme == QScheme::kPerChannel && in->is_dynamic;
  if (w == QWeightFormat::kInt8 && in->dtype == QDtype::kInt8 && in->symmetric) {
    if (per_tensor) return QActFormat::kInt8PerTensor;
    if (per_token) return QActFormat::kInt8PerToken;
  }
  if (w == QWeightFormat::kFp8E4M3 && in->dtype == QDtype::kFp8E4M3) {
    if (per_tensor) return QActFormat::kFp8PerTensor;
    if (per_token) return QActFormat::kFp8PerToken;
  }
  return std::nullopt;
}

}  // namespace

std::optional<NativeFormat> native_format(const quant::LayerQuantSpec& spec, int64_t in) {
  if (!spec.weight || spec.bias) return std::nullopt;
  const auto w = weight_format(*spec.weight, in);
  if (!w) return std::nullopt;
  const auto act = act_format(spec.input, w->first);
  if (!act) return std::nullopt;
  if (!engine::quant_linear_supported(w->first, *act, w->second, in)) return std::nullopt;
  return NativeFormat{w->first, *act, w->second};
}

engine::QuantLinearData native_linear_data(const std::string& module, const NativeFormat& format,
                                           quant::QuantizedTensor weight,
                                           const std::optional<quant::StaticQParams>& input_qparams) {
  if (weight.shape.size() != 2)
    throw Error(ErrorKind::kInvalidInput, "", module + ".weight", "a linear weight must be 2-D", "");
  engine::QuantLinearData d;
  d.weight = format.weight;
  d.act = format.act;
  d.out = static_cast<int64_t>(weight.shape[0]);
  d.in = static_cast<int64_t>(weight.shape[1]);
  d.group = format.group;
  d.codes = std::move(weight.codes);
  d.scales = std::move(weight.scales);
  d.zero_points = std::move(weight.zero_points);
  d.name = module;
  const bool is_static = format.act == engine::QActFormat::kInt8PerTensor || format.act == engine::QActFormat::kFp8PerTensor;
  if (is_static) {
    if (!input_qparams || input_qparams->zero_point != 0)
      throw Error(ErrorKind::kInvalidInput, "", module + ".input_scale",
                  "a static symmetric input spec needs an input scale with zero point 0",
                  "re-export the checkpoint with its calibrated scales");
    d.act_scale = input_qparams->scale;
  }
  return d;
}

}  // namespace qloom::exporter
