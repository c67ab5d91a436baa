// The accuracy gate: relative gap in both metric directions (and a zero
// source), threshold resolution caller -> file -> 0.03, paired standard
// errors against hand-computed values, the three verdicts, and the exact
// eval_report.json key order.
#include "qloom/agent/eval_gap.h"

#include <cmath>
#include <fstream>

#include <gtest/gtest.h>

#include "qloom/core/error.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::agent {
namespace {

TEST(EvalGap, DirectionsAndClamping) {
  EXPECT_EQ(metric_direction("gsm8k"), MetricDirection::kHigherIsBetter);
  EXPECT_EQ(metric_direction("MMLU"), MetricDirection::kHigherIsBetter);
  EXPECT_EQ(metric_direction("wikitext2_ppl"), MetricDirection::kLowerIsBetter);
  EXPECT_EQ(metric_direction("Perplexity"), MetricDirection::kLowerIsBetter);
  EXPECT_EQ(metric_direction("kld"), MetricDirection::kLowerIsBetter);
  // The seed's example: (0.512 - 0.498) / 0.512.
  EXPECT_NEAR(relative_gap(0.512, 0.498, MetricDirection::kHigherIsBetter), 0.02734375, 1e-12);
  EXPECT_EQ(relative_gap(0.50, 0.55, MetricDirection::kHigherIsBetter), 0.0);  // better -> 0
  EXPECT_NEAR(relative_gap(8.0, 8.4, MetricDirection::kLowerIsBetter), 0.05, 1e-12);
  EXPECT_EQ(relative_gap(8.0, 7.0, MetricDirection::kLowerIsBetter), 0.0);
  EXPECT_EQ(relative_gap(0.0, 0.0, MetricDirection::kHigherIsBetter), 0.0);   // zero source, no loss
  EXPECT_EQ(relative_gap(0.0, 0.1, MetricDirection::kLowerIsBetter), 1.0);    // zero source, a loss
  EXPECT_EQ(test::catch_error([] { relative_gap(NAN, 1.0, MetricDirection::kHigherIsBetter); }).kind(),
            ErrorKind::kInvalidInput);
}

TEST(EvalGap, ThresholdResolutionOrder) {
  test::TempDir ws;
  EXPECT_EQ(resolve_threshold(std::nullopt, ws.path()).value, 0.03);
  EXPECT_EQ(resolve_threshold(std::nullopt, ws.path()).source, "default");
  std::ofstream(ws.path() / "eval_gap_threshold.txt") << "0.05\n";
  EXPECT_EQ(resolve_threshold(std::nullopt, ws.path()).value, 0.05);
  EXPECT_EQ(resolve_threshold(std::nullopt, ws.path()).source, "eval_gap_threshold.txt");
  EXPECT_EQ(resolve_threshold(0.10, ws.path()).value, 0.10);  // the caller wins
  EXPECT_EQ(resolve_threshold(0.10, ws.path()).source, "caller");
  std::ofstream(ws.path() / "eval_gap_threshold.txt") << "five percent\n";
  const Error e = test::catch_error([&] { resolve_threshold(std::nullopt, ws.path()); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  EXPECT_NE(e.file().find("eval_gap_threshold.txt"), std::string::npos);
}

TEST(EvalGap, PairedAccuracyStderrByHand) {
  // 4 questions: source 1,1,1,0; quantized 1,0,1,0 -> d = 0,1,0,0.
  const GapEstimate g = paired_accuracy_gap("gsm8k", {1, 1, 1, 0}, {1, 0, 1, 0});
  EXPECT_EQ(g.n, 4u);
  EXPECT_DOUBLE_EQ(g.source_score, 0.75);
  EXPECT_DOUBLE_EQ(g.quantized_score, 0.5);
  EXPECT_NEAR(g.relative_gap, 0.25 / 0.75, 1e-12);
  // sd(d) = sqrt(((0-.25)^2*3 + (1-.25)^2) / 3) = 0.5; se = 0.5/2 = 0.25; / 0.75.
  EXPECT_NEAR(g.gap_stderr, 0.25 / 0.75, 1e-12);
  // sd(source) = 0.5 -> 0.25; sd(quantized) = sqrt(1/3) -> /2.
  EXPECT_NEAR(g.source_stderr, 0.25, 1e-12);
  EXPECT_NEAR(g.quantized_stderr, std::sqrt(1.0 / 3.0) / 2, 1e-12);
  EXPECT_EQ(test::catch_error([] { paired_accuracy_gap("x", {1, 0}, {1}); }).kind(), ErrorKind::kUsage);
}

TEST(EvalGap, PairedPplGapAndVerdicts) {
  std::vector<double> s(1000), q(1000);
  for (size_t i = 0; i < s.size(); ++i) {
    s[i] = 2.0 + 0.5 * std::sin(double(i));
    q[i] = s[i] + 0.02 + 0.01 * std::cos(double(i) * 3);  // ~2% worse ppl
  }
  const GapEstimate g = paired_ppl_gap("wikitext2_ppl", s, q);
  EXPECT_NEAR(g.quantized_score / g.source_score - 1.0, g.relative_gap, 1e-9);
  EXPECT_NEAR(g.relative_gap, std::exp(0.02) - 1.0, 1e-3);
  EXPECT_LT(g.gap_stderr, 0.001);
  EXPECT_EQ(judge(g, 0.05), GateVerdict::kPass);
  EXPECT_EQ(judge(g, 0.01), GateVerdict::kFail);
  // 40 gsm8k problems, 2 more wrong: a 3% threshold cannot be judged.
  std::vector<double> a(40, 0.0), b(40, 0.0);
  for (int i = 0; i < 20; ++i) a[i] = b[i] = 1.0;
  b[0] = b[1] = 0.0;
  const GapEstimate small = paired_accuracy_gap("gsm8k", a, b);
  EXPECT_NEAR(small.relative_gap, 0.1, 1e-12);
  EXPECT_EQ(judge(small, 0.03), GateVerdict::kUnresolved);
  EXPECT_STREQ(verdict_name(judge(small, 0.03)), "unresolved");
}

TEST(EvalGap, ReportKeysInTheSeedsOrder) {
  const GapEstimate g = paired_accuracy_gap("gsm8k", {1, 1, 0}, {1, 0, 0});
  const auto j = eval_report_json(g, "gsm8k", "qloom", 3);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  const std::vector<std::string> want = {"metric_name",      "dataset",          "backend",   "source_score",
                                         "quantized_score",  "relative_gap",     "n",         "limit",
                                         "source_stderr",    "quantized_stderr", "gap_stderr"};
  EXPECT_EQ(keys, want);
  EXPECT_EQ(j["limit"], 3);
  EXPECT_TRUE(eval_report_json(g, "gsm8k", "qloom", std::nullopt)["limit"].is_null());
}

}  // namespace
}  // namespace qloom::agent

namespace qloom::agent {
namespace {

TEST(EvalGapJudge, BothScoresZeroOnAHigherIsBetterMetricIsUnresolved) {
  const auto g = paired_accuracy_gap("gsm8k", std::vector<double>(10, 0.0), std::vector<double>(10, 0.0));
  EXPECT_EQ(g.relative_gap, 0.0);
  EXPECT_EQ(judge(g, 0.05), GateVerdict::kUnresolved);
  // A quantized model that scores where the source scored 0 is no loss either way.
  std::vector<double> q(10, 0.0);
  q[3] = 1;
  EXPECT_NE(judge(paired_accuracy_gap("gsm8k", std::vector<double>(10, 0.0), q), 0.05), GateVerdict::kFail);
}

}  // namespace
}  // namespace qloom::agent
