// Qronos (quant/qronos.h) on single linear layers with a float input stream
// X and a "quantized model" stream X̃ of the same tokens: against the plain
// double implementation of Quark's formulas (quant/gptq_variants_ref.h:
// explicit inverse, Sherman-Morrison trailing block, one column at a time),
// against RTN and GPTQ on ||X Wᵀ - X̃ Qᵀ||², with X = X̃ against GPTQ
// damped alike (the same algorithm then), byte-identical for every thread
// count and ISA, the power iteration, dead columns, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "qloom/core/convert.h"
#include "qloom/core/error.h"
#include "qloom/quant/gptq_linalg_kernels.h"
#include "qloom/quant/qronos.h"
#include "qloom/quant/quantize_ref.h"
#include "quant/gptq_variants_ref.h"

namespace qloom::quant {
namespace {

using vref::int_spec;

using vref::Case;
using vref::cases;

QronosOptions opts(bool act_order, unsigned threads = 2) {
  QronosOptions o;
  o.act_order = act_order;
  o.threads = threads;
  return o;
}

TEST(Qronos, PowerIterationFindsTheLargestEigenvalue) {
  // diag(1..49, 100): λmax = 100 with a gap of 2, so 30 steps converge.
  const int64_t n = 50;
  vref::Mat H(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) H[static_cast<size_t>(i * n + i)] = i + 1 < n ? static_cast<double>(i + 1) : 100.0;
  EXPECT_NEAR(power_iteration_max_eigenvalue(H, n, 30), 100.0, 1e-9);
  const vref::Streams s = vref::make_streams(300, 40, 3);
  const vref::Mat H2 = vref::hessian(s);
  ThreadPool pool(3);
  const double a = power_iteration_max_eigenvalue(H2, 40, 30), b = power_iteration_max_eigenvalue(H2, 40, 30, &pool);
  EXPECT_EQ(0, std::memcmp(&a, &b, sizeof a));
  EXPECT_NEAR(a, vref::power_iteration_ref(H2, 40), 1e-9 * a);
  EXPECT_EQ(power_iteration_max_eigenvalue(vref::Mat(16, 0.0), 4, 30), 0.0);
}

TEST(Qronos, MatchesThePlainImplementationOfQuarksFormulas) {
  const int64_t rows = 40, cols = 320;
  const vref::Streams s = vref::make_streams(900, cols, 11);
  const std::vector<float> W = testgen::make_weights(rows * cols, testgen::Dist::kGaussian, 12);
  const vref::Mat H = vref::hessian(s), G = vref::cross(s, false);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const GptqResult q = qronos_quantize(W.data(), rows, cols, H, G, c.spec, DType::kF32, "w", DType::kF32,
                                         opts(c.act_order, 3));
    const vref::RefOut r = vref::qronos_ref(W, rows, cols, H, G, c.spec, c.act_order, 1e-3);
    size_t differ = 0;
    for (size_t i = 0; i < r.codes.size(); ++i) differ += q.qt.codes[i] != r.codes[i];
    const double e_opt = vref::asym_error(s, W, q.dequantized, rows), e_ref = vref::asym_error(s, W, r.deq, rows);
    std::printf("[ qronos ] %-22s codes differing from the reference: %zu of %zu; error %.6e vs %.6e\n", c.name,
                differ, r.codes.size(), e_opt, e_ref);
    EXPECT_LE(differ, r.codes.size() / 500);
    EXPECT_NEAR(e_opt, e_ref, 2e-3 * e_ref);
    EXPECT_EQ(q.dequantized, dequantize_ref(q.qt));
  }
}

TEST(Qronos, BeatsRtnAndGptqOnTheAsymmetricObjective) {
  const int64_t rows = 64, cols = 256;
  const vref::Streams s = vref::make_streams(1024, cols, 21);
  const std::vector<float> W = testgen::make_weights(rows * cols, testgen::Dist::kGaussian, 22);
  const vref::Mat H = vref::hessian(s), G = vref::cross(s, false);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const GptqResult q = qronos_quantize(W.data(), rows, cols, H, G, c.spec, DType::kF32, "w", DType::kF32,
                                         opts(c.act_order));
    GptqOptions go;
    go.act_order = c.act_order;
    const GptqResult g = gptq_quantize(W.data(), rows, cols, H, c.spec, DType::kF32, "w", DType::kF32, go);
    const std::vector<float> rtn = dequantize_ref(quantize_weight_ref(W.data(), rows, cols, c.spec, DType::kF32, "w"));
    const double e_q = vref::asym_error(s, W, q.dequantized, rows), e_g = vref::asym_error(s, W, g.dequantized, rows),
                 e_r = vref::asym_error(s, W, rtn, rows);
    std::printf("[ qronos ] %-22s ||XW - X~Q||^2: RTN %.4e  GPTQ %.4e  Qronos %.4e (%.3f of GPTQ)\n", c.name, e_r,
                e_g, e_q, e_q / e_g);
    EXPECT_LT(e_q, 0.95 * e_g);
    EXPECT_LT(e_q, 0.5 * e_r);
    EXPECT_FALSE(q.stats.fell_back);
  }
}

TEST(Qronos, WithoutUpstreamErrorItIsGptqDampedAlike) {
  // X = X̃: G = H, and Qronos' first step and re-fit are GPTQ's first
  // column; with GPTQ's damping set to the same absolute value the two agree
  // up to float rounding (different arithmetic: a few flipped codes).
  const int64_t rows = 32, cols = 192;
  vref::Streams s = vref::make_streams(600, cols, 61);
  s.Xq = s.X;
  const std::vector<float> W = testgen::make_weights(rows * cols, testgen::Dist::kGaussian, 62);
  const vref::Mat H = vref::hessian(s);
  const QuantSpec spec = int_spec(QDtype::kInt4, QScheme::kPerGroup, 64, true);
  const GptqResult q = qronos_quantize(W.data(), rows, cols, H, H, spec, DType::kF32, "w", DType::kF32, opts(true));
  double mean = 0;
  for (int64_t i = 0; i < cols; ++i) mean += H[static_cast<size_t>(i * cols + i)];
  mean /= cols;
  GptqOptions go;
  go.damp_percent = 1e-3 * power_iteration_max_eigenvalue(H, cols, 30) / mean;
  const GptqResult g = gptq_quantize(W.data(), rows, cols, H, spec, DType::kF32, "w", DType::kF32, go);
  size_t differ = 0;
  for (size_t i = 0; i < g.qt.codes.size(); ++i) differ += q.qt.codes[i] != g.qt.codes[i];
  EXPECT_LE(differ, g.qt.codes.size() / 500);
  EXPECT_EQ(q.qt.scales, g.qt.scales);
}

TEST(Qronos, BitwiseIdenticalForEveryThreadCountAndIsa) {
  const int64_t rows = 36, cols = 300;
  const vref::Streams s = vref::make_streams(500, cols, 41);
  const std::vector<float> W = testgen::make_weights(rows * cols, testgen::Dist::kGaussian, 42);
  std::vector<Isa> isas{Isa::kScalar};
  if (isa_supported(Isa::kAvx2)) isas.push_back(Isa::kAvx2);
  if (isa_supported(Isa::kAvx512)) isas.push_back(Isa::kAvx512);
  const QuantSpec spec = int_spec(QDtype::kUInt4, QScheme::kPerGroup, 50, false);
  GptqResult first;
  bool have = false;
  for (Isa isa : isas)
    for (unsigned threads : {1u, 2u, 3u}) {
      SCOPED_TRACE(testing::Message() << isa_name(isa) << ", " << threads << " threads");
      linalg::detail::IsaOverride over(isa);
      ThreadPool pool(threads);
      const GptqResult g = qronos_quantize(W.data(), rows, cols, vref::hessian(s), vref::cross(s, false), spec,
                                           DType::kBF16, "w", DType::kBF16, opts(true), &pool);
      if (!have) {
        first = g, have = true;
        continue;
      }
      EXPECT_EQ(g.qt.codes, first.qt.codes);
      EXPECT_EQ(g.qt.zero_points, first.qt.zero_points);
      EXPECT_EQ(0, std::memcmp(&g.stats.loss, &first.stats.loss, sizeof(double)));
    }
}

TEST(Qronos, DeadColumnsOneColumnAndBadInput) {
  const int64_t rows = 8, cols = 64;
  vref::Streams s = vref::make_streams(200, cols, 51);
  for (int64_t t = 0; t < s.n; ++t) s.Xq[static_cast<size_t>(t * cols + 9)] = 0.0f;
  const std::vector<float> W = testgen::make_weights(rows * cols, testgen::Dist::kGaussian, 52);
  const QuantSpec spec = int_spec(QDtype::kInt4, QScheme::kPerChannel, 0, true);
  const GptqResult g = qronos_quantize(W.data(), rows, cols, vref::hessian(s), vref::cross(s, false), spec,
                                       DType::kF32, "w", DType::kF32, opts(true));
  EXPECT_EQ(g.stats.dead_columns, 1);
  EXPECT_FALSE(g.stats.fell_back);
  // One input column: only Qronos' first step, q = Q(w G / H).
  const std::vector<float> w1 = {0.5f, -0.25f};
  const GptqResult one = qronos_quantize(w1.data(), 2, 1, {2.0}, {1.0}, spec, DType::kF32, "w", DType::kF32, opts(false));
  const detail::Plan plan = detail::make_plan(2, 1, spec, DType::kF32, DType::kF32, "w");
  for (int r = 0; r < 2; ++r) {  // the scale from w, the argument w · G / H = w / 2
    float q = 0;
    const uint8_t code = detail::gptq_quantize_one(plan, detail::group_params(plan, &w1[static_cast<size_t>(r)], 1, "w"),
                                                   w1[static_cast<size_t>(r)] / 2, &q);
    EXPECT_EQ(one.qt.codes[static_cast<size_t>(r)], code);
    EXPECT_EQ(one.dequantized[static_cast<size_t>(r)], q);
  }
  QronosOptions dyn = opts(false);
  dyn.static_groups = false;
  EXPECT_THROW(qronos_quantize(W.data(), rows, cols, vref::hessian(s), vref::cross(s, false),
                               int_spec(QDtype::kInt4, QScheme::kPerGroup, 32, true), DType::kF32, "w", DType::kF32,
                               dyn),
               Error);
  EXPECT_THROW(qronos_quantize(W.data(), rows, cols, vref::Mat(3), vref::Mat(3), spec, DType::kF32, "w", DType::kF32),
               Error);
}

}  // namespace
}  // namespace qloom::quant
