// Native kernel family: fp8 e4m3 weights with fp8 activations, and bf16 weights with bf16 activations: vdpbf16ps.
// Contract: qlinear.h. make_quant_linear() validates the data and dispatches here.
#pragma once

#include <memory>

#include "qloom/engine/native/qlinear.h"

namespace qloom::engine::native {

bool bf16dot_linear_supported(QWeightFormat weight, QActFormat act, int64_t group, int64_t in);
std::shared_ptr<const QuantLinear> make_bf16dot_linear(QuantLinearData data);

}  // namespace qloom::engine::native
