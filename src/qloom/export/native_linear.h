// Which Quark layer specs run on the engine's native kernels
// (engine/native/qlinear.h), and the translation of a checkpoint's packed
// weight into the kernel's QuantLinearData (--runtime native).
//
// A spec runs natively when its weight and input specs form one of the
// kernel families' combinations: int8 (per-tensor / per-channel, symmetric)
// with static per-tensor or dynamic per-token symmetric int8 input; fp8_e4m3
// with static per-tensor or dynamic per-token fp8 input; int4 / uint4
// (per-group / per-channel) and MX fp4 weight-only. Anything else (MX fp4
// activations, asymmetric int8 inputs, fp6, bias specs) stays on the
// simulate path for that linear.
#pragma once

#include <optional>
#include <string>

#include "qloom/engine/native/qlinear.h"
#include "qloom/quant/fake_quant.h"
#include "qloom/quant/quant_spec.h"
#include "qloom/quant/quantized_tensor.h"

namespace qloom::exporter {

struct NativeFormat {
  engine::QWeightFormat weight;
  engine::QActFormat act;
  int64_t group;  // QuantLinearData::group for a weight with `in` columns
};

// The native kernel for this spec on a linear with `in` columns, or nullopt.
std::optional<NativeFormat> native_format(const quant::LayerQuantSpec& spec, int64_t in);

// The kernel's data for `module`: the unpacked weight (codes and scales as
// stored) plus the static input scale when the input spec is static
// (`input_qparams` must then be set, with zero point 0).
engine::QuantLinearData native_linear_data(const std::string& module, const NativeFormat& format,
                                           quant::QuantizedTensor weight,
                                           const std::optional<quant::StaticQParams>& input_qparams);

}  // namespace qloom::exporter
