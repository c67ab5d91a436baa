#include "qloom/quant/bf16_calibration.h"

#include "qloom/core/float_codec.h"

namespace qloom::quant {

void round_to_bf16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_float(float_to_bf16(x[i]));
}

}  // namespace qloom::quant
