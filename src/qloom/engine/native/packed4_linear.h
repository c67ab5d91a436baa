// Native kernel family: int4 / uint4 / mxfp4 weight-only, codes packed, dequantized in registers.
// Contract: qlinear.h. make_quant_linear() validates the data and dispatches here.
#pragma once

#include <memory>

#include "qloom/engine/native/qlinear.h"

namespace qloom::engine::native {

bool packed4_linear_supported(QWeightFormat weight, QActFormat act, int64_t group, int64_t in);
std::shared_ptr<const QuantLinear> make_packed4_linear(QuantLinearData data);

}  // namespace qloom::engine::native
