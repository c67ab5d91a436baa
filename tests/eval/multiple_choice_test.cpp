// Multiple-choice scoring: the log-likelihood of an option against a plain
// reference (log-softmax written out), lm-eval's truncation, argmax and
// normalization rules, the standard error, and a run on the demo model that
// gives the same bits whatever the thread count.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "eval/fake_model.h"
#include "qloom/core/error.h"
#include "qloom/text/tokenizer.h"
#include "qloom/eval/mc_tasks.h"
#include "qloom/eval/multiple_choice.h"
#include "qloom/eval/run_eval.h"

namespace qloom::eval {
namespace {

// logits[v] = (v * (token + 1) + position) mod 7, so every row differs.
test::FakeModel fake(int64_t vocab = 11, int64_t max_pos = 512) {
  return test::FakeModel(vocab, [vocab](int32_t tok, int64_t pos, float* row) {
    for (int64_t v = 0; v < vocab; ++v) row[v] = float((v * (tok + 1) + pos) % 7) * 0.5f;
  }, max_pos);
}

double reference_logprob(int64_t vocab, int32_t input, int64_t pos, int32_t target) {
  std::vector<double> row(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v) row[size_t(v)] = double((v * (input + 1) + pos) % 7) * 0.5;
  double mx = row[0];
  for (double x : row) mx = std::max(mx, x);
  double sum = 0;
  for (double x : row) sum += std::exp(x - mx);
  return row[size_t(target)] - mx - std::log(sum);
}

TEST(McScore, SumsLogSoftmaxOverTheContinuation) {
  auto m = fake();
  std::unique_ptr<engine::KvCache> cache;
  const TokenPair p{{1, 2, 3}, {4, 5}};
  const OptionScore s = score_option(m, nullptr, p, 512, cache);
  // inputs 1 2 3 4 (positions 0-3): the continuation 4, 5 is predicted at positions 2 and 3.
  const double want = reference_logprob(11, 3, 2, 4) + reference_logprob(11, 4, 3, 5);
  EXPECT_NEAR(s.loglik, want, 1e-12);
  EXPECT_EQ(s.tokens, 2);
  EXPECT_EQ(m.forward_calls, 1);  // one pass of the whole sequence
}

TEST(McScore, GreedyWhenEveryTargetIsTheFirstArgmax) {
  auto m = fake();
  std::unique_ptr<engine::KvCache> cache;
  // The row for input 0 at position 0 is v % 7: the maximum is at v = 6 only.
  EXPECT_TRUE(score_option(m, nullptr, TokenPair{{0}, {6}}, 512, cache).greedy);
  EXPECT_FALSE(score_option(m, nullptr, TokenPair{{0}, {5}}, 512, cache).greedy);
  // Input 6 at position 1: (7v + 1) % 7 = 1 for every v, a tie: torch.argmax takes v = 0.
  EXPECT_TRUE(score_option(m, nullptr, TokenPair{{9, 6}, {0}}, 512, cache).greedy);
  EXPECT_FALSE(score_option(m, nullptr, TokenPair{{9, 6}, {3}}, 512, cache).greedy);
}

TEST(McScore, TruncatesOnTheLeftAsLmEval) {
  auto m = fake();
  std::unique_ptr<engine::KvCache> cache;
  // max_length 3: (ctx + cont)[-4:][:-1] = {3, 4, 5}; cont {5, 6} at positions 1, 2.
  const OptionScore s = score_option(m, nullptr, TokenPair{{1, 2, 3, 4}, {5, 6}}, 3, cache);
  EXPECT_NEAR(s.loglik, reference_logprob(11, 4, 1, 5) + reference_logprob(11, 5, 2, 6), 1e-12);
  // A continuation longer than the window is scored on what fits.
  const OptionScore t = score_option(m, nullptr, TokenPair{{1}, {2, 3, 4, 5, 6}}, 3, cache);
  EXPECT_EQ(t.tokens, 3);
}

TEST(McDecide, FirstMaximumWinsAndNormalizesByCharactersAndBytes) {
  McItem it;
  it.gold = 1;
  it.options = {{-4.0, false, 1}, {-4.0, false, 1}, {-6.0, false, 1}};
  it.chars = {2, 2, 4};
  it.bytes = {2, 4, 4};
  decide(it);
  EXPECT_EQ(it.pred, 0);        // tie: the first
  EXPECT_EQ(it.pred_norm, 2);   // -1.5 per char beats -2
  EXPECT_EQ(it.pred_bytes, 1);  // -2, -1, -1.5 per byte
  EXPECT_FALSE(it.acc());
  EXPECT_TRUE(it.acc_bytes());
  it.options[2].loglik = std::nan("");
  decide(it);
  EXPECT_EQ(it.pred, 2);  // numpy.argmax takes the first NaN
}

TEST(McMetric, StderrIsSampleStddevOverRootN) {
  const MetricValue m = mean_and_stderr({1, 0, 1, 1});
  EXPECT_DOUBLE_EQ(m.value, 0.75);
  EXPECT_NEAR(m.stderr_, std::sqrt(0.75 / 3.0) / 2.0, 1e-15);  // sqrt(sum sq / (n-1)) / sqrt(n)
  EXPECT_EQ(mean_and_stderr({1}).stderr_, 0.0);
  EXPECT_EQ(mean_and_stderr({}).value, 0.0);
}

EvalOptions demo_options(unsigned threads) {
  EvalOptions o;
  o.model_dir = QLOOM_DEMO_MODEL_DIR;
  o.task = "hellaswag";
  o.limit = 6;
  o.threads = threads;
  return o;
}

TEST(McRun, DemoModelBundledHellaswagIsThreadCountInvariant) {
  const EvalReport a = run_eval(demo_options(1));
  const EvalReport b = run_eval(demo_options(3));
  EXPECT_EQ(a.n, 6);
  EXPECT_EQ(a.n_total, 200);
  EXPECT_TRUE(a.has_acc_norm);
  EXPECT_EQ(a.samples.acc_correct, b.samples.acc_correct);
  EXPECT_EQ(a.samples.acc_norm_correct, b.samples.acc_norm_correct);
  EXPECT_EQ(a.acc, b.acc);
  ASSERT_FALSE(a.notes.empty());
  EXPECT_NE(a.notes[0].find("first 200 of the 10042"), std::string::npos);
}

TEST(McRun, OptionsAreCheckedBeforeAnyModelLoads) {
  EvalOptions o = demo_options(1);
  o.task = "arc_easy";  // nothing bundled
  EXPECT_THROW(run_eval(o), Error);
  o.task = "hellaswag";
  o.num_fewshot = 2;  // no pool
  EXPECT_THROW(run_eval(o), Error);
  o.num_fewshot = -1;
  EXPECT_THROW(run_eval(o), Error);
}

}  // namespace
}  // namespace qloom::eval
