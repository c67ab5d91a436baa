#include "qloom/core/e5m3.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>


namespace qloom {
namespace {

// Quark's decode table (quark/torch/kernel/float8_e5m3/lookup.py), written
// out independently of e5m3_to_float.
double table_value(int b) {
  const int e = (b >> 3) & 31, m = b & 7;
  if (e == 31 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return std::ldexp(m / 8.0, -14);
  return std::ldexp(1.0 + m / 8.0, e - 15);
}

// Nearest finite code to x >= 0 (ties to the even code), by brute force.
uint8_t nearest(float x) {
  int best = 0;
  double bd = std::fabs(x - table_value(0));
  for (int c = 1; c < 255; ++c) {
    const double d = std::fabs(static_cast<double>(x) - table_value(c));
    if (d < bd || (d == bd && (c % 2) == 0)) {
      best = c;
      bd = d;
    }
  }
  return static_cast<uint8_t>(best);
}

TEST(E5M3, DecodeMatchesQuarkTable) {
  for (int c = 0; c < 256; ++c) {
    const float v = e5m3_to_float(static_cast<uint8_t>(c));
    if (c == 0xFF) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    EXPECT_EQ(static_cast<double>(v), table_value(c)) << c;
  }
  EXPECT_EQ(e5m3_to_float(kE5M3MaxCode), 114688.0f);
  EXPECT_EQ(e5m3_to_float(1), 0x1p-17f);
  EXPECT_EQ(e5m3_to_float(0x78), 1.0f);
}

TEST(E5M3, EveryCodeRoundTrips) {
  for (int c = 0; c < 255; ++c) EXPECT_EQ(float_to_e5m3(e5m3_to_float(static_cast<uint8_t>(c))), c) << c;
}

TEST(E5M3, EncodeIsNearestTiesToEven) {
  // Midpoints between neighbouring codes, and one float either side.
  for (int c = 0; c + 1 < 255; ++c) {
    const double lo = table_value(c), hi = table_value(c + 1);
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << c;  // exact in f32
    EXPECT_EQ(float_to_e5m3(mid), (c % 2 == 0) ? c : c + 1) << c;
    EXPECT_EQ(float_to_e5m3(std::nextafter(mid, 0.0f)), c) << c;
    EXPECT_EQ(float_to_e5m3(std::nextafter(mid, 1e9f)), c + 1) << c;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exp(-22.0f, 17.5f);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::exp2(exp(rng));
    EXPECT_EQ(float_to_e5m3(x), nearest(x)) << x;
  }
}

TEST(E5M3, SpecialValues) {
  EXPECT_EQ(float_to_e5m3(0.0f), 0);
  EXPECT_EQ(float_to_e5m3(-0.0f), 0);
  EXPECT_EQ(float_to_e5m3(-3.0f), 0);                          // clamp to 0
  EXPECT_EQ(float_to_e5m3(std::numeric_limits<float>::infinity()), kE5M3MaxCode);
  EXPECT_EQ(float_to_e5m3(-std::numeric_limits<float>::infinity()), 0);
  EXPECT_EQ(float_to_e5m3(1e30f), kE5M3MaxCode);
  EXPECT_EQ(float_to_e5m3(114688.0f), kE5M3MaxCode);
  EXPECT_EQ(float_to_e5m3(122880.0f), kE5M3MaxCode);           // beyond max: clamped, not NaN
  EXPECT_EQ(float_to_e5m3(std::numeric_limits<float>::quiet_NaN()), kE5M3Nan);
  EXPECT_EQ(float_to_e5m3(0x1p-18f), 0);                       // half the smallest subnormal: tie to 0
  EXPECT_EQ(float_to_e5m3(std::nextafter(0x1p-18f, 1.0f)), 1);
  EXPECT_EQ(float_to_e5m3(0x1p-149f), 0);                      // f32 denormal
  EXPECT_EQ(float_to_e5m3(0x1.f8p-15f), 0x08);                 // rounds up into the first normal
}

}  // namespace
}  // namespace qloom
