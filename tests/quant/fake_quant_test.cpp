// Activation fake quantization (quant/fake_quant.h): static fp8 / int8 with a
// given scale against hand-computed values, dynamic specs against the weight
// reference quantizer, and NaN / empty inputs.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "qloom/quant/fake_quant.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"

namespace qloom::quant {
namespace {

std::vector<float> gaussian(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(FakeQuant, StaticFp8PerTensorHandValues) {
  const QuantSpec spec = *get_scheme("fp8").linear.input;
  ASSERT_FALSE(spec.is_dynamic);
  // scale 0.5: x / 0.5 = 2.3 -> e4m3 2.25 -> 1.125; 1000 saturates at 448 -> 224;
  // 0.0009765625/0.5 = 2^-9 is e4m3's smallest subnormal -> exact.
  std::vector<float> x = {1.15f, -1.15f, 1000.0f, -1000.0f, 0.0f, 0.0009765625f};
  fake_quantize_activation(x.data(), 1, static_cast<int64_t>(x.size()), spec, StaticQParams{0.5f, 0});
  EXPECT_FLOAT_EQ(x[0], 1.125f);
  EXPECT_FLOAT_EQ(x[1], -1.125f);
  EXPECT_FLOAT_EQ(x[2], 224.0f);
  EXPECT_FLOAT_EQ(x[3], -224.0f);
  EXPECT_EQ(x[4], 0.0f);
  EXPECT_FLOAT_EQ(x[5], 0.0009765625f);
}

TEST(FakeQuant, StaticInt8PerTensorHandValues) {
  const QuantSpec spec = *get_scheme("int8").linear.input;
  std::vector<float> x = {0.26f, -0.25f, 100.0f, -100.0f, 0.1f};
  fake_quantize_activation(x.data(), 1, 5, spec, StaticQParams{0.1f, 0});
  EXPECT_FLOAT_EQ(x[0], 3 * 0.1f);     // 2.6 -> 3
  EXPECT_FLOAT_EQ(x[1], -2 * 0.1f);    // -2.5 -> -2 (half to even)
  EXPECT_FLOAT_EQ(x[2], 127 * 0.1f);   // clamped
  EXPECT_FLOAT_EQ(x[3], -128 * 0.1f);  // clamped
  EXPECT_FLOAT_EQ(x[4], 1 * 0.1f);
}

TEST(FakeQuant, StaticSpecNeedsQParams) {
  const QuantSpec spec = *get_scheme("fp8").linear.input;
  std::vector<float> x(4, 1.0f);
  EXPECT_THROW(fake_quantize_activation(x.data(), 1, 4, spec, std::nullopt), Error);
}

// Dynamic specs: per token (ptpc_fp8) and MX per 32 (mxfp4) equal the
// reference quantizer applied to the [tokens, features] matrix, dequantized.
TEST(FakeQuant, DynamicSpecsMatchReferenceQuantizer) {
  for (const char* scheme : {"ptpc_fp8", "mxfp4"}) {
    const QuantSpec spec = *get_scheme(scheme).linear.input;
    ASSERT_TRUE(spec.is_dynamic) << scheme;
    const int64_t rows = 7, cols = 96;
    std::vector<float> x = gaussian(static_cast<size_t>(rows * cols), 11);
    x[5] *= 40.0f;  // an outlier in token 0 only
    QuantSpec rowwise = spec;
    if (rowwise.qscheme == QScheme::kPerChannel) rowwise.ch_axis = 0;  // one scale per token row
    const QuantizedTensor q = quantize_weight_ref(x.data(), rows, cols, rowwise, DType::kF32, "x", DType::kF32);
    const std::vector<float> want = dequantize_ref(q);
    std::vector<float> got = x;
    fake_quantize_activation(got.data(), rows, cols, spec, std::nullopt);
    ASSERT_EQ(got, want) << scheme;
    // Per-token scales: the outlier in token 0 must not coarsen token 1.
    double err1 = 0;
    for (int64_t c = 0; c < cols; ++c) err1 = std::max(err1, std::fabs(double(got[cols + c]) - x[cols + c]));
    EXPECT_LT(err1, 0.6) << scheme;
  }
}

TEST(FakeQuant, NaNStaysNaNAndEmptyIsNoOp) {
  const QuantSpec fp8 = *get_scheme("fp8").linear.input;
  std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), 1.0f};
  fake_quantize_activation(x.data(), 1, 2, fp8, StaticQParams{1.0f, 0});
  EXPECT_TRUE(std::isnan(x[0]));
  EXPECT_FLOAT_EQ(x[1], 1.0f);
  const QuantSpec mx = *get_scheme("mxfp4").linear.input;
  std::vector<float> y(32, 1.0f);
  y[3] = std::numeric_limits<float>::quiet_NaN();
  fake_quantize_activation(y.data(), 1, 32, mx, std::nullopt);
  EXPECT_TRUE(std::isnan(y[3]));
  fake_quantize_activation(nullptr, 0, 0, mx, std::nullopt);
}

}  // namespace
}  // namespace qloom::quant
