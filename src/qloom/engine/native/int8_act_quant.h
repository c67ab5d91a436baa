// Symmetric int8 activation quantization for the native int8 x int8 linears
// (int8_linear.cpp), computing EXACTLY the codes and scales of qloom's
// simulate runtime (quant::fake_quantize_activation), which the engine cannot
// call (dependencies point down: quant -> engine). The rules, read in
// src/qloom/quant/fake_quant.cpp and quantize_fast.cpp / quantize_ref.cpp:
//
//   static per tensor (the checkpoint's input_scale s, zero point 0):
//     inv = 1.0f / s                    (f32, once)
//     q   = clamp(nearbyint(x * inv), -128, 127)
//     NaN stays NaN (simulate skips it); ±inf -> 127 / -128 (the clamp).
//   dynamic per token (Quark per_channel, one scale per row; simulate runs
//   quant::quantize_weight row-wise with spec int8, symmetric, f32 scales):
//     amax = max(-min(min_k x, 0), max(max_k x, 0))  (= max_k |x_k|)
//     s    = max(amax / 127.5f, 2^-23)  (f32; 127.5 = (127 - (-128)) / 2)
//     inv  = 1.0f / s; q = clamp(nearbyint(x * inv), -128, 127)
//     Simulate quantizes nothing in a call whose x holds any NaN / inf.
// All arithmetic is f32, round to nearest even, no flush-to-zero /
// denormals-are-zero: quant/'s FpEnvGuard forces that environment, and
// Int8FpEnv below does the same for the native kernels.
//
// tests/engine/native_int8_test.cpp checks every ISA's codes and scales
// against quant::quantize_weight / quant::fake_quantize_activation.
#pragma once

#include <cstdint>

#include "qloom/core/fp_env.h"
#include "qloom/core/convert.h"

namespace qloom::engine::native {

inline constexpr float kInt8ActEps = 1.1920928955078125e-07f;  // 2^-23 (FLT_EPSILON)

// Round-to-nearest-even without FTZ / DAZ for its lifetime (core/fp_env.h);
// one guard around a parallel_for covers the workers too.
using Int8FpEnv = IeeeFpEnv;

// The dynamic per-token scale from a finite row's amax: max(amax / 127.5f, 2^-23).
inline float int8_token_scale(float amax) {
  const float s = amax / 127.5f;
  return s > kInt8ActEps ? s : kInt8ActEps;
}

// max_k |x_k| over x[0, n); sets *nonfinite when some x_k is NaN or ±inf
// (the amax is then meaningless). n >= 1.
float int8_row_amax(Isa isa, const float* x, int64_t n, bool* nonfinite);
// codes[k] = clamp(nearbyint(x[k] * inv), -128, 127) for k < n (the code of
// a NaN x is unspecified); returns true when some x[k] is NaN.
bool int8_quantize_row(Isa isa, const float* x, int64_t n, float inv, int8_t* codes);

// The plain scalar forms of the two above (run_ref uses them).
float int8_row_amax_ref(const float* x, int64_t n, bool* nonfinite);
bool int8_quantize_row_ref(const float* x, int64_t n, float inv, int8_t* codes);

}  // namespace qloom::engine::native
