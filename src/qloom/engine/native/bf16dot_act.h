// Activation quantizers of the bf16 dot-product family: one row of fp32
// activations -> bf16 codes the kernels multiply (bf16dot_kernels.h), and the
// row's scale. They reproduce the simulate runtime's codes exactly (the test
// holds them to quant::fake_quantize_activation / quant::quantize_weight),
// without depending on quant/:
//   kBf16:       x rounded to bf16, nearest even (qloom::float_to_bf16; NaN
//                stays NaN, overflow gives inf); scale 1.
//   kFp8Static:  code = e4m3(clamp(x / s, -448, 448)) with s the checkpoint's
//                input_scale (RNE, saturating; NaN stays NaN, +-inf -> +-448),
//                as quant's static_per_tensor; scale s.
//   kFp8Dynamic: s = amax / 448 over the row (eps = 2^-23 if that is 0), then
//                the codes as kFp8Static, as quant's fp8_params / encode_fp8
//                with f32 model and scale dtypes (ptpc_fp8).
// An fp8 code's value has at most 4 significant bits, so its bf16 pattern
// (the top half of the float) is exact.
// Arithmetic in the IEEE default environment (callers hold bf16dot::IeeeEnv).
#pragma once

#include <cstdint>

#include "qloom/core/convert.h"

namespace qloom::engine::native::bf16dot {

enum class ActCode : uint8_t { kBf16, kFp8Static, kFp8Dynamic };

inline constexpr float kFp8Max = 448.0f;
inline constexpr float kDynamicScaleEps = 0x1p-23f;  // torch.finfo(float32).eps, Quark's zero-scale fill

// Scalar references (float_codec.h's encoders).
uint16_t bf16_code(float x);
uint16_t fp8_code_bf16(float x, float scale);  // bf16 bits of e4m3(clamp(x / scale, +-448))
float fp8_dynamic_scale(float amax);

// Quantizes x[0, n) into codes[0, n) (+ codes[n] = +0 when n is odd) with the
// implementation of `isa` (kScalar, kAvx2, kAvx512: same bits; the caller
// checks the CPU). *scale gets the row's scale (static_scale for kFp8Static).
// Returns false, leaving codes unspecified, when kind is kFp8Dynamic and the
// row holds NaN or inf (the simulate path then skips quantization).
bool quantize_row(Isa isa, ActCode kind, const float* x, int64_t n, float static_scale, uint16_t* codes,
                  float* scale);

}  // namespace qloom::engine::native::bf16dot
