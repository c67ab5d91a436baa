// Fake quantization of activations: quantize then dequantize in place, so
// that an fp32 engine computes what a served quantized checkpoint computes
// (activation quantization of fp8 / int8 / MX schemes, the FP8 KV cache).
//
// x is [rows, cols] row-major: rows = tokens, cols = features.
//  - static per_tensor (fp8_e4m3, int8/uint8): the checkpoint's scale (and
//    zero point): q = clamp(round(x / scale) [+ zp]), x' = (q - zp) * scale;
//    fp8: x' = e4m3(clamp(x / scale, +-448)) * scale (RNE, saturating).
//  - dynamic per_tensor / per_channel (per token, Quark ch_axis 1) /
//    per_group (MX, along cols): scales from the data itself, computed by
//    the same quantizer as weights (quantize_fast.h, bit-identical to quantize_ref.h) with rows =
//    tokens, then dequantized.
// Arithmetic is f32 (the bf16 rounding of intermediate results a bf16 model
// would see is not reproduced; the difference is below the quantization step).
#pragma once

#include <cstdint>
#include <optional>

#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

struct StaticQParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};

// Throws Error(kUnsupported) for a spec it cannot simulate (static non
// per-tensor, formats without a codec) and kUsage for a static spec without
// qparams. NaN inputs stay NaN.
void fake_quantize_activation(float* x, int64_t rows, int64_t cols, const QuantSpec& spec,
                              const std::optional<StaticQParams>& qparams);

}  // namespace qloom::quant
