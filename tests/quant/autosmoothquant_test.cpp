// AutoSmoothQuant's pure functions (quant/autosmoothquant.h): the scale
// formula against a plain evaluation on random and adversarial statistics
// (zeros, huge values, NaN / inf refused), the |Δ|^p loss sums, the static
// input scale observed on x / s, the input transform s ⊙ Q_in(x / s), and
// Quark's compute_scale_loss names and per-model defaults.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "qloom/core/float_codec.h"
#include "qloom/quant/autosmoothquant.h"
#include "qloom/quant/quantize_ref.h"
#include "qloom/quant/scheme_registry.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

std::vector<float> plain_scales(const std::vector<float>& x_max, double r) {
  std::vector<double> s;
  for (float x : x_max) s.push_back(std::max(std::pow(static_cast<double>(x), r), 1e-4));
  double lo = s[0], hi = s[0];
  for (double v : s) lo = std::min(lo, v), hi = std::max(hi, v);
  std::vector<float> out;
  for (double v : s) out.push_back(static_cast<float>(v / std::sqrt(lo * hi)));
  return out;
}

TEST(AutoSmoothScales, MatchThePlainFormulaOnRandomAndAdversarialStatistics) {
  std::mt19937 rng(3);
  std::lognormal_distribution<float> d(0.0f, 2.0f);
  for (size_t n : {1u, 7u, 64u, 577u}) {
    std::vector<float> x(n);
    for (float& v : x) v = d(rng);
    if (n > 2) x[1] = 0.0f, x[2] = 3e38f;  // a dead channel, a huge outlier
    for (int i = 0; i < 10; ++i) {
      const double r = i / 10.0;
      const std::vector<float> got = autosmooth_scales(x, r), want = plain_scales(x, r);
      ASSERT_EQ(got.size(), n);
      for (size_t j = 0; j < n; ++j) EXPECT_FLOAT_EQ(got[j], want[j]) << "n " << n << " r " << r << " j " << j;
    }
  }
  // r = 0 is no smoothing: every s is 1.
  for (float v : autosmooth_scales(std::vector<float>{0.0f, 5.0f, 1e9f}, 0.0)) EXPECT_EQ(v, 1.0f);
  // All-zero statistics: every s clamps to 1e-4 and normalizes to 1.
  for (float v : autosmooth_scales(std::vector<float>(9, 0.0f), 0.7)) EXPECT_EQ(v, 1.0f);
}

TEST(AutoSmoothScales, RefuseBadStatistics) {
  EXPECT_EQ(test::catch_error([] { autosmooth_scales({}, 0.5); }).kind(), ErrorKind::kInvalidInput);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), -1.0f}) {
    const std::vector<float> x{1.0f, bad, 2.0f};
    const Error e = test::catch_error([&] { autosmooth_scales(x, 0.5); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(e.message().find("channel 1"), std::string::npos) << e.message();
  }
}

TEST(ScaleLoss, SumsOfPowersMatchAPlainLoop) {
  std::mt19937 rng(5);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> y(1001), ref(1001);
  for (size_t i = 0; i < y.size(); ++i) y[i] = d(rng), ref[i] = d(rng);
  for (double p : {2.0, 1.0, 0.5}) {
    double want = 0.0;
    for (size_t i = 0; i < y.size(); ++i) want += std::pow(std::fabs(double(y[i]) - ref[i]), p);
    EXPECT_NEAR(scale_loss_sum(y.data(), ref.data(), y.size(), p), want, 1e-12 * want) << p;
  }
  y[17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(scale_loss_sum(y.data(), ref.data(), y.size(), 1.0)));
  EXPECT_EQ(scale_loss_sum(y.data(), ref.data(), 0, 2.0), 0.0);
}

TEST(ScaleLoss, QuarkNamesAndPerModelDefaults) {
  EXPECT_EQ(parse_scale_loss("MAE", "k"), ScaleLoss::kMae);
  EXPECT_EQ(parse_scale_loss("RMSE", "k"), ScaleLoss::kRmse);
  EXPECT_EQ(scale_loss_power(parse_scale_loss("MSE", "k")), 2.0);
  EXPECT_EQ(scale_loss_power(ScaleLoss::kRmse), 0.5);
  for (const char* bad : {"mse", "L1", ""}) EXPECT_EQ(test::catch_error([&] { parse_scale_loss(bad, "k"); }).item(), "k");
  EXPECT_EQ(test::catch_error([] { parse_scale_loss(2, "k"); }).kind(), ErrorKind::kUsage);
  EXPECT_EQ(default_scale_loss("llama"), ScaleLoss::kMae);    // AUTOSMOOTHQUANT_MAP["llama"]
  EXPECT_EQ(default_scale_loss("mixtral"), ScaleLoss::kMae);
  EXPECT_EQ(default_scale_loss("qwen3_moe"), ScaleLoss::kMse);  // the dataclass default
  EXPECT_EQ(default_scale_loss("qwen2"), ScaleLoss::kMse);
  EXPECT_EQ(scale_loss_name(ScaleLoss::kMae), "MAE");
}

TEST(SmoothInput, StaticScaleIsObservedOnTheScaledInput) {
  const QuantSpec in = *get_scheme("fp8").linear.input;  // static per-tensor fp8
  const std::vector<float> x_max{2.0f, 100.0f, 0.5f}, s{1.0f, 10.0f, 0.1f};  // x / s max: 2, 10, 5
  const StaticQParams q = autosmooth_static_qparams(x_max, s, in, DType::kF32, DType::kF32);
  EXPECT_EQ(q.scale, static_scale_from_amax(10.0f, in, DType::kF32, DType::kF32));
  EXPECT_FLOAT_EQ(q.scale, 10.0f / 448.0f);
}

// x <- s ⊙ Q(x / s) for dynamic per-token fp8 (ptpc_fp8's input), against
// a plain per-row e4m3 round trip; no spec leaves x alone.
TEST(SmoothInput, PerTokenFp8AgainstAPlainRoundTrip) {
  const QuantSpec in = *get_scheme("ptpc_fp8").linear.input;
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.0f, 1.0f);
  const int64_t rows = 5, cols = 33;
  std::vector<float> x(rows * cols), s(cols);
  for (float& v : x) v = d(rng);
  x[3] = 0.0f;
  x[40] = 1e4f;  // an outlier in row 1
  for (float& v : s) v = std::exp(d(rng));
  std::vector<float> got = x;
  smooth_quantize_input(got.data(), rows, cols, s, SmoothInputQuant{});
  EXPECT_EQ(got, x);
  SmoothInputQuant q;
  q.spec = &in;
  smooth_quantize_input(got.data(), rows, cols, s, q);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(x[r * cols + c] / s[c]));
    const float scale = amax / 448.0f;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x[r * cols + c] / s[c];
      const float want = fp8_e4m3_to_float(float_to_fp8_e4m3(v / scale)) * scale * s[c];
      EXPECT_FLOAT_EQ(got[r * cols + c], want) << r << "," << c;
    }
  }
}

}  // namespace
}  // namespace qloom::quant
