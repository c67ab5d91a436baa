// measure_distortion: hand-computed statistics, the exact / zero-reference
// edge cases, NaN propagation.
#include "qloom/quant/distortion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace qloom::quant {
namespace {

TEST(Distortion, HandComputed) {
  // ref = [1, -2, 3, 0.5], approx = [1, -1, 3.5, 0]:
  // errors 0, -1, -0.5, 0.5 -> sum sq 1.5, mse 0.375; sum ref^2 = 14.25;
  // SQNR = 10 log10(14.25 / 1.5) = 10 log10(9.5); rel_l2 = sqrt(1.5 / 14.25).
  const std::vector<float> ref = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> approx = {1.0f, -1.0f, 3.5f, 0.0f};
  const DistortionStats s = measure_distortion(ref.data(), approx.data(), 4);
  EXPECT_EQ(s.n, 4u);
  EXPECT_DOUBLE_EQ(s.mse, 0.375);
  EXPECT_DOUBLE_EQ(s.sqnr_db, 10.0 * std::log10(9.5));
  EXPECT_DOUBLE_EQ(s.max_abs_err, 1.0);
  EXPECT_EQ(s.sign_flips, 0u);
  EXPECT_EQ(s.rounded_to_zero, 1u);
  EXPECT_DOUBLE_EQ(s.rel_l2, std::sqrt(1.5 / 14.25));
}

TEST(Distortion, SignFlipsAndZeros) {
  const std::vector<float> ref = {1.0f, -1.0f, 0.0f, 2.0f, -0.5f};
  const std::vector<float> approx = {-0.1f, 0.2f, 1.0f, 0.0f, -0.0f};
  const DistortionStats s = measure_distortion(ref.data(), approx.data(), 5);
  EXPECT_EQ(s.sign_flips, 2u);       // 1 -> -0.1, -1 -> 0.2 (a zero ref or approx is no flip)
  EXPECT_EQ(s.rounded_to_zero, 2u);  // 2 -> 0, -0.5 -> -0
  EXPECT_DOUBLE_EQ(s.max_abs_err, 2.0);
}

TEST(Distortion, ExactIsInfiniteSqnr) {
  const std::vector<float> v = {1.0f, -2.0f, 0.0f};
  const DistortionStats s = measure_distortion(v.data(), v.data(), 3);
  EXPECT_EQ(s.mse, 0.0);
  EXPECT_TRUE(std::isinf(s.sqnr_db) && s.sqnr_db > 0);
  EXPECT_EQ(s.rel_l2, 0.0);
  EXPECT_EQ(s.max_abs_err, 0.0);
  const DistortionStats e = measure_distortion(nullptr, nullptr, 0);
  EXPECT_EQ(e.n, 0u);
  EXPECT_TRUE(std::isinf(e.sqnr_db) && e.sqnr_db > 0);
  // All-zero reference, all-zero approximation: exact.
  const std::vector<float> z(4, 0.0f);
  EXPECT_TRUE(std::isinf(measure_distortion(z.data(), z.data(), 4).sqnr_db));
}

TEST(Distortion, ZeroReferenceWithError) {
  const std::vector<float> ref(3, 0.0f);
  const std::vector<float> approx = {0.0f, 1.0f, 0.0f};
  const DistortionStats s = measure_distortion(ref.data(), approx.data(), 3);
  EXPECT_TRUE(std::isinf(s.sqnr_db) && s.sqnr_db < 0);
  EXPECT_TRUE(std::isinf(s.rel_l2));
  EXPECT_DOUBLE_EQ(s.mse, 1.0 / 3.0);
}

TEST(Distortion, NaNPropagates) {
  const std::vector<float> ref = {1.0f, 2.0f};
  const std::vector<float> approx = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  const DistortionStats s = measure_distortion(ref.data(), approx.data(), 2);
  EXPECT_TRUE(std::isnan(s.mse));
  EXPECT_TRUE(std::isnan(s.sqnr_db));
  EXPECT_TRUE(std::isnan(s.rel_l2));
  EXPECT_TRUE(std::isnan(s.max_abs_err));
}

TEST(Distortion, SqnrOfUniformNoise) {
  // A known ratio: approx = 0.9 * ref -> error 0.1 * ref -> SQNR = 20 dB.
  std::vector<float> ref(1000), approx(1000);
  for (int i = 0; i < 1000; ++i) {
    ref[i] = static_cast<float>((i % 17) - 8);
    approx[i] = ref[i] - 0.1f * ref[i];
  }
  EXPECT_NEAR(measure_distortion(ref.data(), approx.data(), 1000).sqnr_db, 20.0, 1e-5);
}

}  // namespace
}  // namespace qloom::quant
