// engine/vector_exp: exp_f32 against the correctly rounded exp (double
// std::exp rounded to float) on a dense sweep of the float line, its edge
// values, and the same bits on every ISA path and array length.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "qloom/core/convert.h"
#include "qloom/engine/vector_exp.h"
#include "support/subprocess.h"

namespace qloom::engine {
namespace {

int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if (ia < 0) ia = std::numeric_limits<int32_t>::min() - ia;
  if (ib < 0) ib = std::numeric_limits<int32_t>::min() - ib;
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

// Every 97th float in [-104, 89] (18.4 million values): at most 2 ulp
// from the correctly rounded result where that is a normal float, at most 1
// ulp of the smallest normal in the denormal range (measured: 1 ulp max).
TEST(VectorExp, WithinTwoUlpOfTheCorrectlyRoundedExp) {
  std::vector<float> x;
  for (float v = -104.0f; v < 89.0f;) {
    x.push_back(v);
    int32_t bits;
    std::memcpy(&bits, &v, 4);
    bits += v < 0 ? -97 : 97;
    if (v < 0 && bits < 0 && std::fabs(v) < 1e-30f) bits = 0;
    std::memcpy(&v, &bits, 4);
    if (v < 0 && v > -1e-30f) v = 1e-30f;
  }
  std::vector<float> y(x.size());
  exp_f32(x.data(), y.data(), static_cast<int64_t>(x.size()));
  int64_t worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x[i])));
    if (std::isinf(want)) {
      EXPECT_TRUE(std::isinf(y[i])) << x[i];
    } else if (want < std::numeric_limits<float>::min()) {
      ASSERT_LE(std::fabs(y[i] - want), std::numeric_limits<float>::min() * 0x1p-22f) << x[i];
    } else {
      const int64_t d = ulp_distance(y[i], want);
      worst = std::max(worst, d);
      ASSERT_LE(d, 2) << "x " << x[i] << " got " << y[i] << " want " << want;
    }
  }
  std::printf("[ exp  ] %zu values, worst %lld ulp\n", x.size(), static_cast<long long>(worst));
}

TEST(VectorExp, EdgeValues) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float in[] = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, nan, 88.72f, 88.73f, 89.0f, 1e30f, -103.0f, -104.0f,
                      -1e30f, 1e-40f, -1e-40f, 0.5f * std::log(2.0f)};
  std::vector<float> y(std::size(in));
  exp_f32(in, y.data(), static_cast<int64_t>(y.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_EQ(y[2], static_cast<float>(std::exp(1.0)));
  EXPECT_EQ(y[4], inf);
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_TRUE(std::isnan(y[6]));
  EXPECT_TRUE(std::isfinite(y[7]));  // exp(88.72) < FLT_MAX
  EXPECT_EQ(y[8], inf);
  EXPECT_EQ(y[9], inf);
  EXPECT_EQ(y[10], inf);
  EXPECT_GT(y[11], 0.0f);  // a denormal
  EXPECT_LT(y[11], std::numeric_limits<float>::min());
  EXPECT_EQ(y[12], 0.0f);
  EXPECT_EQ(y[13], 0.0f);
  EXPECT_EQ(y[14], 1.0f);
  EXPECT_EQ(y[15], 1.0f);
  for (size_t i = 0; i < y.size(); ++i) {
    const float s = exp_f32_scalar(in[i]);
    EXPECT_EQ(std::memcmp(&s, &y[i], 4), 0) << in[i];
  }
}

// The SIMD body and its scalar tail: every length 0..70 and offsets, against
// exp_f32_scalar bit for bit (which the capped-ISA run below repeats).
TEST(VectorExp, SameBitsAsTheScalarPathForEveryLength) {
  std::vector<float> x(300);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((static_cast<int64_t>(i * 7919 % 601) - 300)) * 0.37f;
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[40] = -std::numeric_limits<float>::infinity();
  for (int64_t n = 0; n <= 70; ++n)
    for (int64_t off : {0, 1, 3}) {
      std::vector<float> y(static_cast<size_t>(n) + 1, 7.0f);
      exp_f32(x.data() + off, y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float s = exp_f32_scalar(x[static_cast<size_t>(off + i)]);
        ASSERT_EQ(std::memcmp(&s, &y[static_cast<size_t>(i)], 4), 0) << "n " << n << " off " << off << " i " << i;
      }
      EXPECT_EQ(y[static_cast<size_t>(n)], 7.0f);
    }
  std::vector<float> inplace(x.begin(), x.end()), copy(x.size());
  exp_f32(x.data(), copy.data(), static_cast<int64_t>(x.size()));
  exp_f32(inplace.data(), inplace.data(), static_cast<int64_t>(inplace.size()));
  EXPECT_EQ(std::memcmp(inplace.data(), copy.data(), copy.size() * 4), 0);
}

// The same two tests under QLOOM_MAX_ISA=avx2 and =scalar.
TEST(VectorExp, CappedIsaSubprocesses) {
  test::expect_passes_under_isa_caps("VectorExp.SameBitsAsTheScalarPathForEveryLength:VectorExp.EdgeValues");
}

}  // namespace
}  // namespace qloom::engine
