// Progressive (two-stage) weights, Quark's ProgressiveSpec as int4_fp8 uses
// it: fp8 e4m3 per tensor (scale in f32, not rounded to the model dtype),
// then int4 per channel on the fp8 VALUES. Known answers, the reference
// against the fast path on random and adversarial inputs for every model
// dtype and thread count, and the refusals.
#include "qloom/quant/progressive.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "qloom/core/error.h"
#include "qloom/core/float_codec.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"
#include "quant/weight_gen.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

const QuantSpec& first() { return *get_scheme("int4_fp8").linear.weight; }
const QuantSpec& second() { return *get_scheme("int4_fp8").linear.weight_stage2; }

TEST(Progressive, Int4Fp8SpecsAreQuarks) {
  const LayerQuantSpec& l = get_scheme("int4_fp8").linear;
  EXPECT_EQ(first().dtype, QDtype::kFp8E4M3);
  EXPECT_EQ(first().qscheme, QScheme::kPerTensor);
  EXPECT_EQ(first().scale_type, "float32");
  EXPECT_EQ(second().dtype, QDtype::kInt4);
  EXPECT_EQ(second().qscheme, QScheme::kPerChannel);
  EXPECT_EQ(second().ch_axis, 0);
  EXPECT_EQ(second().scale_type, "float32");
  EXPECT_TRUE(second().symmetric);
  ASSERT_TRUE(l.input.has_value());
  EXPECT_TRUE(l.input->is_dynamic);
  EXPECT_EQ(l.input->scale_type, "float32");
  EXPECT_TRUE(is_supported_progressive(first(), second()));
  EXPECT_EQ(quark_scale_dtype(first(), DType::kBF16), DType::kF32);
  EXPECT_EQ(quark_scale_dtype(second(), DType::kBF16), DType::kF32);
}

TEST(Progressive, KnownAnswer) {
  // amax 448 -> s1 = 1, the fp8 values are the weights themselves.
  // Row 0: s2 = 448 / 7.5; 448 / s2 = 7.5 -> 8 -> clamped to 7; -224 -> -3.75 -> -4.
  // Row 1: s2 = 0.4f; 3 * 2.5 = 7.5 -> 8 -> 7; 2 -> 5; 1 -> 2.5 -> 2 (even); 0.5 -> 1.25 -> 1.
  const std::vector<float> w = {448, -224, 1, 0, 3, 2, 1, 0.5f};
  const ProgressiveTensor t = quantize_progressive_ref(w.data(), 2, 4, first(), second(), "w");
  ASSERT_EQ(t.first.scales.size(), 1u);
  EXPECT_EQ(t.first.scales[0], 1.0f);
  EXPECT_TRUE(t.first.codes.empty());
  ASSERT_EQ(t.second.scales.size(), 2u);
  EXPECT_EQ(t.second.scales[0], 448.0f / 7.5f);
  EXPECT_EQ(t.second.scales[1], 0.4f);
  const std::vector<int> want = {7, -4, 0, 0, 7, 5, 2, 1};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(static_cast<int8_t>(t.second.codes[i]), want[i]) << i;
  const std::vector<float> d = dequantize_progressive(t);
  EXPECT_EQ(d[1], -4.0f * (448.0f / 7.5f) * 1.0f);
  EXPECT_EQ(d[5], 5.0f * 0.4f);
}

TEST(Progressive, FirstScaleIsF32NotRoundedToTheModelDtype) {
  // bf16 model, amax 1: Quark casts amax to f32 before dividing (scale_type
  // "float32"), so s1 = 1 / 448 in f32, which bf16 cannot hold.
  std::vector<float> w(8 * 16, 0.25f);
  w[3] = 1.0f;
  const ProgressiveTensor t = quantize_progressive_ref(w.data(), 8, 16, first(), second(), "w", DType::kBF16);
  EXPECT_EQ(t.first.scales[0], 1.0f / 448.0f);
  EXPECT_NE(t.first.scales[0], detail::round_to(DType::kBF16, 1.0f / 448.0f));
  EXPECT_EQ(t.first.scale_dtype, DType::kF32);
  EXPECT_EQ(t.second.scale_dtype, DType::kF32);
  // The fp8 values are 448 (w = 1) and 112 (w = 0.25): row 0's s2 is
  // rC(448 / 7.5) = bf16(59.73) = 59.75 (the observer's arithmetic in bf16).
  EXPECT_EQ(t.second.scales[0], 59.75f);
}

bool same(const QuantizedTensor& a, const QuantizedTensor& b) {
  return a.shape == b.shape && a.codes == b.codes && a.zero_points == b.zero_points && a.scale_dtype == b.scale_dtype &&
         a.scales.size() == b.scales.size() &&
         std::memcmp(a.scales.data(), b.scales.data(), a.scales.size() * sizeof(float)) == 0;
}

TEST(Progressive, FastIsBitExactWithReference) {
  uint64_t seed = 11;
  for (DType md : {DType::kF32, DType::kBF16, DType::kF16})
    for (uint64_t cols : {8u, 40u, 1024u})
      for (testgen::Dist d : {testgen::Dist::kGaussian, testgen::Dist::kStudentT3, testgen::Dist::kLaplace}) {
        const uint64_t rows = 9;
        auto w = testgen::make_weights(rows * cols, d, seed++);
        if (md == DType::kBF16) testgen::to_bf16_grid(w);
        if (md == DType::kF16) testgen::to_f16_grid(w);
        // Adversarial rows: all zero, one huge outlier, denormals, -0.0.
        for (uint64_t c = 0; c < cols; ++c) w[1 * cols + c] = 0.0f;
        w[2 * cols] = md == DType::kF16 ? 60000.0f : 3.0e4f;
        w[3 * cols + 1] = std::ldexp(1.0f, -130);
        w[4 * cols] = -0.0f;
        const ProgressiveTensor ref = quantize_progressive_ref(w.data(), rows, cols, first(), second(), "w", md);
        for (unsigned th : {1u, 2u, 5u, 0u}) {
          const ProgressiveTensor fast = quantize_progressive(w.data(), rows, cols, first(), second(), "w", md, th);
          ASSERT_TRUE(same(ref.first, fast.first)) << dtype_name(md) << " cols " << cols << " threads " << th;
          ASSERT_TRUE(same(ref.second, fast.second)) << dtype_name(md) << " cols " << cols << " threads " << th;
        }
        const auto a = dequantize_progressive(ref, 1), b = dequantize_progressive(ref, 3);
        ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
      }
}

TEST(Progressive, ErrorsAndRefusals) {
  std::vector<float> w(16, 1.0f);
  w[5] = NAN;
  Error e = test::catch_error([&] { quantize_progressive(w.data(), 2, 8, first(), second(), "m.weight"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(e.item(), "m.weight");
  w[5] = 1.0f;
  QuantSpec asym = second();
  asym.symmetric = false;
  asym.dtype = QDtype::kUInt4;
  e = test::catch_error([&] { quantize_progressive_ref(w.data(), 2, 8, first(), asym, "m.weight"); });
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_FALSE(is_supported_progressive(second(), first()));
  QuantSpec scale_quant = second();
  scale_quant.is_scale_quant = true;
  EXPECT_FALSE(is_supported_progressive(first(), scale_quant));
}

}  // namespace
}  // namespace qloom::quant
