// OCP MX fp6 (mxfp6_e2m3, mxfp6_e3m2): the element encoder (Quark's
// fake_quantize_element + Pack_fp6 code), the shared-scale "even" rounding
// with each format's mbits / emax, and the fast AVX2 element loop against
// the reference on every bf16 value and random f32 bit patterns. The
// quantizer-level ref-vs-fast checks (all schemes, dtypes, thread counts,
// adversarial inputs) are in quantize_fast_test.cpp, which covers the fp6
// schemes through the registry.
#include "qloom/quant/mx_fp6.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/quantize_fast.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"
#include "quant/weight_gen.h"

namespace qloom::quant {
namespace {

const MxElement& e2m3() { return mx_element(QDtype::kFp6E2M3); }
const MxElement& e3m2() { return mx_element(QDtype::kFp6E3M2); }

TEST(MxFp6, FormatParametersAreQuarks) {
  // get_dtype_params: (ebits, mbits, emax) and the largest magnitude.
  EXPECT_EQ(e2m3().ebits, 2);
  EXPECT_EQ(e2m3().mbits, 3);
  EXPECT_EQ(e2m3().emax, 2);
  EXPECT_EQ(e2m3().max_norm, 7.5f);
  EXPECT_EQ(e3m2().ebits, 3);
  EXPECT_EQ(e3m2().mbits, 2);
  EXPECT_EQ(e3m2().emax, 4);
  EXPECT_EQ(e3m2().max_norm, 28.0f);
  EXPECT_EQ(mx_element(QDtype::kFp4).emax, 2);
}

TEST(MxFp6, ElementKnownAnswers) {
  // e2m3: sign | 2 exponent bits (bias 1) | 3 mantissa bits.
  EXPECT_EQ(mx_encode_ref(e2m3(), 1.0f), 0x08);
  EXPECT_EQ(mx_encode_ref(e2m3(), 0.125f), 0x01);   // smallest subnormal
  EXPECT_EQ(mx_encode_ref(e2m3(), 7.5f), 0x1F);
  EXPECT_EQ(mx_encode_ref(e2m3(), 100.0f), 0x1F);   // saturates
  EXPECT_EQ(mx_encode_ref(e2m3(), -7.5f), 0x3F);
  EXPECT_EQ(mx_encode_ref(e2m3(), 3.875f), 0x18);   // tie 3.75 / 4.0 -> even (4.0)
  EXPECT_EQ(mx_encode_ref(e2m3(), 0.0625f), 0x00);  // tie 0 / 0.125 -> 0
  EXPECT_EQ(mx_encode_ref(e2m3(), -0.01f), 0x00);   // rounds to zero: +0, not 0x20
  EXPECT_EQ(mx_encode_ref(e2m3(), -0.0f), 0x00);
  // e3m2: sign | 3 exponent bits (bias 3) | 2 mantissa bits.
  EXPECT_EQ(mx_encode_ref(e3m2(), 1.0f), 0x0C);
  EXPECT_EQ(mx_encode_ref(e3m2(), 0.0625f), 0x01);  // smallest subnormal 2^-2 / 4
  EXPECT_EQ(mx_encode_ref(e3m2(), 28.0f), 0x1F);
  EXPECT_EQ(mx_encode_ref(e3m2(), 15.0f), 0x1C);    // tie 14 / 16 -> even (16)
  EXPECT_EQ(mx_encode_ref(e3m2(), -1e-9f), 0x00);
  for (int c = 0; c < 64; ++c) {
    const auto code = static_cast<uint8_t>(c);
    if ((c & 0x1F) == 0) continue;  // both zeros encode as +0
    EXPECT_EQ(mx_encode_ref(e2m3(), mx_decode(e2m3(), code)), code) << c;
    EXPECT_EQ(mx_encode_ref(e3m2(), mx_decode(e3m2(), code)), code) << c;
  }
}

TEST(MxFp6, EvenScaleRoundingUsesEachFormatsMantissaBits) {
  // even_round adds 1 << (23 - mbits - 1) to the f32 bits of amax.
  // e2m3 (mbits 3, emax 2): 7.5 = 1.875 * 2^2 stays (scale 2^0);
  // 7.75 = 1.9375 * 2^2 rounds up to 2^3 (scale 2^1).
  EXPECT_EQ(detail::mx_params(7.5f, 3, 2).scale, 1.0f);
  EXPECT_EQ(detail::mx_params(7.75f, 3, 2).scale, 2.0f);
  // e3m2 (mbits 2, emax 4): 28 = 1.75 * 2^4 stays; 30 = 1.875 * 2^4 rounds up.
  EXPECT_EQ(detail::mx_params(28.0f, 2, 4).scale, 1.0f);
  EXPECT_EQ(detail::mx_params(30.0f, 2, 4).scale, 2.0f);
  // fp4 (mbits 1) already rounds 1.75 * 2^n up.
  EXPECT_EQ(detail::mx_params(7.0f, 1, 2).scale, 2.0f);
  EXPECT_EQ(detail::mx_params(7.0f, 3, 2).scale, 1.0f);
  // All-zero block: 2^-126 (codes 0), as for fp4.
  EXPECT_EQ(detail::mx_params(0.0f, 3, 2).scale, std::ldexp(1.0f, -126));
}

TEST(MxFp6, QuantizerKnownAnswer) {
  // One block of 32: amax 7.75 -> scale 2; elements x / 2 on the e2m3 grid.
  std::vector<float> w(32, 0.0f);
  w[0] = 7.75f;   // 3.875 -> 4.0 (tie to even)
  w[1] = -1.0f;   // -0.5
  w[2] = 0.1f;    // 0.05 -> 0
  w[3] = -0.2f;   // -0.1 -> -0.125
  const QuantSpec spec = *get_scheme("mxfp6_e2m3").linear.weight;
  const QuantizedTensor q = quantize_weight_ref(w.data(), 1, 32, spec, DType::kF32, "w");
  ASSERT_EQ(q.scales.size(), 1u);
  EXPECT_EQ(q.scales[0], 2.0f);
  EXPECT_EQ(q.scale_dtype, DType::kE8M0);
  EXPECT_EQ(q.codes[0], 0x18);
  EXPECT_EQ(q.codes[1], 0x24);
  EXPECT_EQ(q.codes[2], 0x00);
  EXPECT_EQ(q.codes[3], 0x21);
  const std::vector<float> d = dequantize_ref(q);
  EXPECT_EQ(d[0], 8.0f);
  EXPECT_EQ(d[1], -1.0f);
  EXPECT_EQ(d[3], -0.25f);
}

// The AVX2 element loop against the reference, per format and scale.
void check_block(const MxElement& e, const std::vector<float>& x, float inv) {
  std::vector<uint8_t> fast(x.size()), slow(x.size());
  mx_encode_fp6_block(e, x.data(), inv, fast.data(), x.size(), isa_supported(Isa::kAvx2));
  for (size_t i = 0; i < x.size(); ++i) slow[i] = mx_encode_ref(e, x[i] * inv);
  for (size_t i = 0; i < x.size(); ++i)
    ASSERT_EQ(int(fast[i]), int(slow[i])) << "x " << x[i] << " inv " << inv << " at " << i;
}

TEST(MxFp6, FastElementLoopMatchesReferenceOnEveryBf16AndRandomBits) {
  std::vector<float> bf16;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isfinite(f)) bf16.push_back(f);
  }
  testgen::Rng rng(7);
  std::vector<float> bits;
  while (bits.size() < 200003) {  // odd length: the scalar tail runs too
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng.next()));
    if (std::isfinite(f)) bits.push_back(f);
  }
  for (const MxElement* e : {&e2m3(), &e3m2()})
    for (int k : {-127, -126, -20, -3, 0, 2, 5, 30, 127}) {
      SCOPED_TRACE(std::string(quant_dtype_name(e->dtype)) + " inv 2^" + std::to_string(k));
      check_block(*e, bf16, std::ldexp(1.0f, k));
      check_block(*e, bits, std::ldexp(1.0f, k));
    }
}

TEST(MxFp6, DequantizeFastMatchesReference) {
  for (const char* scheme : {"mxfp6_e2m3", "mxfp6_e3m2"}) {
    const QuantSpec spec = *get_scheme(scheme).linear.weight;
    const auto w = testgen::make_weights(7 * 96, testgen::Dist::kStudentT3, 3);
    const QuantizedTensor q = quantize_weight(w.data(), 7, 96, spec, DType::kF32, "w");
    const auto a = dequantize_ref(q), b = dequantize(q, 2);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << scheme << i;
  }
}

}  // namespace
}  // namespace qloom::quant
