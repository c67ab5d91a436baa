// exp over float arrays, the same bits under every ISA (QLOOM_MAX_ISA
// scalar | avx2 | avx512) and on every machine: qloom's own polynomial,
// not libm's expf (whose FMA and non-FMA variants glibc picks per CPU).
// The engine's SiLU and attention softmax use it.
//
// Algorithm (each step one IEEE operation, in the same order on every path):
//   x is clamped to [-104, 89] (NaN stays NaN);
//   n = nearbyint(x · log2 e)                      (round to nearest even)
//   r = fma(-n, ln2_lo, fma(-n, ln2_hi, x))        (|r| <= ~0.347)
//   p = 1 + r + r²·P(r), P a degree-5 polynomial in Horner form with fma
//   exp(x) = (p · 2^⌊n/2⌋) · 2^(n - ⌊n/2⌋)         (two exact powers of two:
//            denormal results round once, 89 overflows to +inf, -104 gives 0)
// Accuracy against the correctly rounded value: at most 2 ulp on normal
// results (tests/engine/vector_exp_test.cpp measures it on a dense sweep).
#pragma once

#include <cstdint>

namespace qloom::engine {

// y[i] = exp(x[i]) for i < n; y may alias x.
void exp_f32(const float* x, float* y, int64_t n);

// The scalar path of exp_f32 for one value (the reference the SIMD paths
// equal bit for bit).
float exp_f32_scalar(float x);

}  // namespace qloom::engine
