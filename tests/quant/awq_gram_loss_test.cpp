// The AWQ Gram-form loss (quant/awq_gram_loss.h) against evaluating the
// candidate on the inputs themselves: the same squared error per part of
// output rows, the same search result, and its error cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "qloom/quant/awq_gram_loss.h"
#include "qloom/quant/scheme_registry.h"
#include "quant/weight_gen.h"
#include "support/expect_error.h"

namespace qloom::quant {
namespace {

// out 300 (two full parts of 128 and one of 44), in 96, 300 tokens with hot
// channels; the weight in BF16 to exercise the widening.
struct Direct {
  static constexpr int64_t kOut = 300, kIn = 96, kTokens = 300;
  engine::LinearWeight w;
  std::vector<float> x;
  std::vector<double> gram;
  Direct() {
    w.type = engine::WeightType::kBF16;
    w.out = kOut;
    w.in = kIn;
    const std::vector<float> f = testgen::make_weights(kOut * kIn, testgen::Dist::kGaussian, 5);
    for (float v : f) {
      uint32_t bits;
      __builtin_memcpy(&bits, &v, sizeof bits);
      w.bf16.push_back(static_cast<uint16_t>(bits >> 16));
    }
    w.bias.assign(kOut, 0.25f);
    testgen::Rng rng(6);
    x.resize(kTokens * kIn);
    for (float& v : x) v = static_cast<float>(rng.normal());
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t c : {1, 30, 95}) x[static_cast<size_t>(t * kIn + c)] *= 40.0f;
    gram.assign(kIn * kIn, 0.0);
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t i = 0; i < kIn; ++i)
        for (int64_t j = 0; j < kIn; ++j)
          gram[static_cast<size_t>(i * kIn + j)] +=
              static_cast<double>(x[static_cast<size_t>(t * kIn + i)]) * x[static_cast<size_t>(t * kIn + j)];
  }
  // Σ over tokens and rows [r0, r1) of (y_c - y)^2, both by linear_ref.
  double direct_se(const engine::LinearWeight& c, int64_t r0, int64_t r1) const {
    std::vector<float> y(static_cast<size_t>(kTokens * kOut)), yc(y.size());
    engine::linear_ref(x.data(), kTokens, w, y.data());
    engine::linear_ref(x.data(), kTokens, c, yc.data());
    double se = 0.0;
    for (int64_t t = 0; t < kTokens; ++t)
      for (int64_t o = r0; o < r1; ++o) {
        const double d = static_cast<double>(yc[static_cast<size_t>(t * kOut + o)]) - y[static_cast<size_t>(t * kOut + o)];
        se += d * d;
      }
    return se;
  }
};

std::vector<float> x_mean_of(const Direct& d) {
  std::vector<float> m(Direct::kIn, 0.0f);
  for (int64_t t = 0; t < Direct::kTokens; ++t)
    for (int64_t c = 0; c < Direct::kIn; ++c)
      m[static_cast<size_t>(c)] += std::fabs(d.x[static_cast<size_t>(t * Direct::kIn + c)]) / Direct::kTokens;
  return m;
}

// Tolerance: the Gram product runs in fp32 over in = 96 terms per entry;
// measured relative differences are below 2e-6, asserted 1e-4.
TEST(AwqGramLoss, EachPartIsTheSquaredErrorOfItsOutputRows) {
  const Direct d;
  const QuantSpec spec = *get_scheme("int4_wo_32").linear.weight;
  ThreadPool pool(2);
  AwqGramLoss loss("fc", d.w, d.gram, Direct::kTokens, pool);
  EXPECT_EQ(loss.parts(), 3);
  EXPECT_EQ(loss.count(), static_cast<double>(Direct::kTokens * Direct::kOut));
  const std::vector<float> xm = x_mean_of(d);
  for (float ratio : {0.0f, 0.5f}) {
    std::vector<float> s(xm.size());
    for (size_t i = 0; i < s.size(); ++i) s[i] = std::pow(std::max(xm[i], 1e-4f), ratio);
    AwqCandidates c;
    c.emplace("fc", awq_candidate(d.w, spec, s, {}, "fc"));
    loss.begin(c);
    for (int64_t p = 0; p < loss.parts(); ++p) {
      const int64_t r0 = p * AwqGramLoss::kRowPart, r1 = std::min(Direct::kOut, r0 + AwqGramLoss::kRowPart);
      const double want = d.direct_se(c.at("fc"), r0, r1);
      ASSERT_GT(want, 0.0);
      EXPECT_NEAR(loss.part_se(p), want, 1e-4 * want) << "ratio " << ratio << " part " << p;
    }
    loss.end();
  }
}

TEST(AwqGramLoss, PrunedSearchMatchesTheDirectSearch) {
  const Direct d;
  const QuantSpec spec = *get_scheme("uint4_wo_32").linear.weight;
  ThreadPool pool(1);
  AwqGramLoss loss("fc", d.w, d.gram, Direct::kTokens, pool);
  const std::vector<float> xm = x_mean_of(d);
  const AwqConfig cfg;
  const AwqScaleResult full = awq_search_scales(xm, {{"fc", &d.w, &spec}}, cfg, {}, [&](const AwqCandidates& c) {
    return d.direct_se(c.at("fc"), 0, Direct::kOut) / (Direct::kTokens * Direct::kOut);
  });
  const AwqScaleResult r = awq_search_scales_pruned(xm, {{"fc", &d.w, &spec}}, cfg, {}, loss, 7);
  EXPECT_EQ(r.ratio, full.ratio);
  EXPECT_EQ(r.scales, full.scales);
  EXPECT_NEAR(r.loss, full.loss, 1e-4 * full.loss);
}

TEST(AwqGramLoss, NonFiniteCandidateAndBadInputs) {
  const Direct d;
  ThreadPool pool(1);
  AwqGramLoss loss("fc", d.w, d.gram, Direct::kTokens, pool);
  AwqCandidates c;
  engine::LinearWeight bad;
  bad.out = d.w.out;
  bad.in = d.w.in;
  bad.f32 = d.w.values_f32();
  bad.f32[5] = std::numeric_limits<float>::quiet_NaN();
  c.emplace("fc", bad);
  loss.begin(c);
  EXPECT_TRUE(std::isnan(loss.part_se(0)));
  EXPECT_FALSE(std::isnan(loss.part_se(1)));
  EXPECT_EQ(loss.part_se(1), 0.0);  // the candidate equals W there
  EXPECT_EQ(test::catch_error([&] { loss.part_se(3); }).kind(), ErrorKind::kInternal);
  loss.end();
  EXPECT_EQ(test::catch_error([&] { loss.begin(AwqCandidates{}); }).kind(), ErrorKind::kInternal);
  EXPECT_EQ(test::catch_error([&] { AwqGramLoss("fc", d.w, std::vector<double>(10), 5, pool); }).kind(),
            ErrorKind::kInternal);
  EXPECT_EQ(test::catch_error([&] { AwqGramLoss("fc", d.w, d.gram, 0, pool); }).kind(), ErrorKind::kInternal);
}

}  // namespace
}  // namespace qloom::quant
