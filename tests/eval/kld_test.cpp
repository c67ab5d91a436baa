// KL divergence statistics on hand-made distributions.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/fake_model.h"
#include "qloom/eval/kld.h"

namespace qloom::eval {
namespace {

const float kLn3 = float(std::log(3.0));

TEST(KldMaths, IdenticalDistributionsGiveZero) {
  const float a[4] = {0.1f, -2.0f, 3.5f, 0.0f};
  EXPECT_EQ(kl_divergence(a, a, 4), 0.0);
}

TEST(KldMaths, HandComputedTwoWay) {
  const float p[2] = {0.0f, kLn3};  // (1/4, 3/4)
  const float q[2] = {0.0f, 0.0f};  // (1/2, 1/2)
  const double expected = 0.25 * std::log(0.25 / 0.5) + 0.75 * std::log(0.75 / 0.5);
  EXPECT_NEAR(kl_divergence(p, q, 2), expected, 1e-7);
  // KL is not symmetric: KL(q || p) = 1/2 ln(2) + 1/2 ln(2/3)
  EXPECT_NEAR(kl_divergence(q, p, 2), 0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75),
              1e-7);
  EXPECT_EQ(argmax(q, 2), 0);  // first index on ties
  EXPECT_EQ(argmax(p, 2), 1);
}

TEST(KldMaths, MedianAndPercentileAsLlamaCpp) {
  const std::vector<double> odd = {1, 2, 3, 4, 5};
  EXPECT_EQ(median_sorted(odd), 3.0);
  const std::vector<double> even = {1, 2, 3, 10};
  EXPECT_EQ(median_sorted(even), 2.5);
  // p = fraction * (N-1), linear interpolation
  EXPECT_NEAR(percentile_sorted(odd, 0.99), 4.96, 1e-12);
  EXPECT_NEAR(percentile_sorted(even, 0.5), 2.5, 1e-12);
  EXPECT_EQ(percentile_sorted(even, 1.0), 10.0);
  EXPECT_EQ(percentile_sorted(even, 0.0), 1.0);
}

TEST(KldStatsTest, IdenticalModelsSummary) {
  KldStats s;
  const float rows[3][3] = {{0, 1, 2}, {2, 1, 0}, {0.5f, 0.5f, 3}};
  for (int i = 0; i < 3; ++i) s.add(rows[i], rows[i], 3, i);
  const KldSummary k = summarize(s);
  EXPECT_EQ(k.count, 3);
  EXPECT_EQ(k.kld_mean, 0.0);
  EXPECT_EQ(k.kld_median, 0.0);
  EXPECT_EQ(k.kld_p99, 0.0);
  EXPECT_EQ(k.top1_agreement, 1.0);
  EXPECT_EQ(k.ppl_ratio, 1.0);
  EXPECT_EQ(k.ppl_source, k.ppl_quantized);
}

TEST(KldStatsTest, DifferentModelsSummary) {
  KldStats s;
  const float p[2] = {0.0f, kLn3};
  const float q[2] = {0.0f, 0.0f};
  s.add(p, q, 2, 1);  // source p, quantized q, target 1
  s.add(p, p, 2, 0);
  const KldSummary k = summarize(s);
  const double kl = 0.25 * std::log(0.5) + 0.75 * std::log(1.5);
  EXPECT_NEAR(k.kld_mean, kl / 2, 1e-7);
  EXPECT_NEAR(k.kld_median, kl / 2, 1e-7);  // mean of the two middle values
  EXPECT_NEAR(k.kld_max, kl, 1e-7);
  EXPECT_EQ(k.top1_agreement, 0.5);
  // nll source: ln(4/3), ln 4; quantized: ln 2, ln 4
  EXPECT_NEAR(k.ppl_source, std::exp((std::log(4.0 / 3) + std::log(4.0)) / 2), 1e-6);
  EXPECT_NEAR(k.ppl_quantized, std::exp((std::log(2.0) + std::log(4.0)) / 2), 1e-6);
  EXPECT_NEAR(k.ppl_ratio, k.ppl_quantized / k.ppl_source, 1e-9);
}

TEST(KldRun, SameModelTwiceIsZeroAndFullAgreement) {
  test::FakeModel m(6, [](int32_t tok, int64_t pos, float* row) {
    for (int i = 0; i < 6; ++i) row[i] = float((tok * 7 + i * 3 + pos) % 5);
  });
  std::vector<int32_t> doc(30);
  for (size_t i = 0; i < doc.size(); ++i) doc[i] = int32_t((i * 5) % 6);
  const auto windows = make_windows(Protocol::kQuark, 30, 10, 1);
  const KldResult r = run_kld(m, nullptr, m, nullptr, doc, windows);
  EXPECT_EQ(r.windows, 3);
  const KldSummary k = summarize(r.stats);
  EXPECT_EQ(k.count, 27);
  EXPECT_EQ(k.kld_mean, 0.0);
  EXPECT_EQ(k.top1_agreement, 1.0);
  EXPECT_EQ(k.ppl_ratio, 1.0);
}

}  // namespace
}  // namespace qloom::eval
