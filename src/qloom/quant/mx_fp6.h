// OCP MX element formats of qloom's MX quantizer (quantize_ref.h rule (4)):
// fp4 e2m1 and the two fp6 formats, e2m3 and e3m2 (mxfp6_e2m3, mxfp6_e3m2,
// mxfp4_mxfp6_e2m3). The shared e8m0 scale of a block of 32 follows the same
// "even" rounding for all of them, with each format's mantissa bits and emax;
// the elements are rounded to the nearest value of the format, ties to even,
// saturating at its largest magnitude, and a zero result is +0.
//
// Source of truth (amd-quark 0.13 wheel):
//   quark/torch/quantization/utils.py            get_dtype_params (ebits,
//       mbits, emax: fp4 2/1/2, fp6_e2m3 2/3/2, fp6_e3m2 3/2/4), even_round
//   quark/torch/kernel/hw_emulation/csrc/mx/funcs.cuh  fake_quantize_element
//       (RNE on the f32 mantissa, subnormals by the exponent shift, clamp to
//       max_norm, a zero mantissa returns +0.0)
//   quark/torch/utils/pack.py                    Pack_fp6 (the 6-bit code of
//       an element: sign in bit 5, then exponent and mantissa bits)
// The element rule equals core/float_codec.h's float_to_fp6_* (RNE,
// saturating) except for the sign of zero, which Quark drops.
#pragma once

#include <cstddef>
#include <cstdint>

#include "qloom/quant/quant_spec.h"

namespace qloom::quant {

// The parameters Quark's get_dtype_params gives an MX element format.
struct MxElement {
  QDtype dtype;
  int ebits, mbits, emax;
  int bias;        // exponent bias, 2^(ebits-1) - 1
  float max_norm;  // largest magnitude: 6, 7.5, 28
  uint8_t sign_bit;  // 0x08 (fp4) or 0x20 (fp6)
};

bool is_mx_element(QDtype d);  // fp4, fp6_e2m3, fp6_e3m2
// The element's parameters; Error(kInternal) for a non-MX dtype.
const MxElement& mx_element(QDtype d);

// Reference element encoder: the code of q (= x / scale) in `e`.
uint8_t mx_encode_ref(const MxElement& e, float q);
// The value of a code (exact).
float mx_decode(const MxElement& e, uint8_t code);

// The fast fp6 element loop: out[i] = mx_encode_ref(e, x[i] * inv_scale)
// bit for bit (inv_scale = 2^-k exactly, so x * inv_scale == x / 2^k). AVX2
// when `avx2` (the caller checked the CPU), else the reference per element.
// Only fp6 formats (fp4 has its own loop in quantize_fast.cpp).
void mx_encode_fp6_block(const MxElement& e, const float* x, float inv_scale, uint8_t* out, size_t n, bool avx2);

}  // namespace qloom::quant
