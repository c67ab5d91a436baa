// Native kernel family: int8 weights with int8 activations (static per-tensor or dynamic per-token), VNNI.
// Contract: qlinear.h. make_quant_linear() validates the data and dispatches here.
#pragma once

#include <memory>

#include "qloom/engine/native/qlinear.h"

namespace qloom::engine::native {

bool int8_linear_supported(QActFormat act, int64_t group, int64_t in);
std::shared_ptr<const QuantLinear> make_int8_linear(QuantLinearData data);

}  // namespace qloom::engine::native
