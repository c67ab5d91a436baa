// Per-sample scores (EvalReport::samples) that let two runs be paired: ppl's
// per-token NLLs reproduce the ppl, gsm8k's per-question 0/1 scores the
// accuracies, kld's NLL pairs the two perplexities; and EvalOptions::stage
// says where a failing run stopped. On the demo model
// (models/stories260K-hf-bf16) and a fake model.
#include <cmath>
#include <numeric>
#include <string>

#include <gtest/gtest.h>

#include "eval/fake_model.h"
#include "qloom/core/error.h"
#include "qloom/eval/perplexity.h"
#include "qloom/eval/run_eval.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace qloom::eval {
namespace {

const std::string kDemo = QLOOM_DEMO_MODEL_DIR;

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

EvalOptions demo_ppl(int64_t limit) {
  EvalOptions o;
  o.model_dir = kDemo;
  o.task = "ppl";
  o.seq_len = 128;
  o.limit = limit;
  o.threads = 2;
  return o;
}

TEST(EvalSamples, PplTokenNllsReproduceThePpl) {
  const EvalReport r = run_eval(demo_ppl(4));
  ASSERT_EQ(r.windows, 4);
  ASSERT_EQ(r.tokens_scored, 4 * 127);
  ASSERT_EQ(r.samples.token_nll.size(), size_t(r.tokens_scored));
  EXPECT_NEAR(std::exp(mean(r.samples.token_nll)) / r.ppl, 1.0, 1e-9);
  for (double x : r.samples.token_nll) EXPECT_GT(x, 0.0);
  EXPECT_TRUE(r.samples.source_token_nll.empty());
  EXPECT_TRUE(r.samples.strict_correct.empty());
  // In order: the first 2 windows' tokens are the first 254 of the 4-window run.
  const EvalReport r2 = run_eval(demo_ppl(2));
  ASSERT_EQ(r2.samples.token_nll.size(), 254u);
  for (size_t i = 0; i < 254; ++i) EXPECT_EQ(r2.samples.token_nll[i], r.samples.token_nll[i]) << i;
}

TEST(EvalSamples, RunPerplexityListsEveryScoredTokenInOrder) {
  // Token t's logits favour token (t + 1) % 4: predicted tokens score low.
  test::FakeModel m(4, [](int32_t tok, int64_t, float* row) {
    for (int i = 0; i < 4; ++i) row[i] = i == (tok + 1) % 4 ? 2.0f : 0.0f;
  });
  const std::vector<int32_t> doc = {0, 1, 2, 0, 0, 1, 3, 0};
  const auto windows = make_windows(Protocol::kQuark, int64_t(doc.size()), 4, std::nullopt);
  const PplResult r = run_perplexity(m, nullptr, doc, windows);
  ASSERT_EQ(r.token_nll.size(), 6u);
  const double hit = std::log(std::exp(2.0) + 3.0) - 2.0, miss = std::log(std::exp(2.0) + 3.0);
  const double want[6] = {hit, hit, miss, hit, miss, hit};  // 0->1 1->2 2->0 | 0->1 1->3 3->0
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(r.token_nll[i], want[i], 1e-12) << i;
  EXPECT_NEAR(std::exp(mean(r.token_nll)), r.nll.ppl(), 1e-12);
}

TEST(EvalSamples, Gsm8kPerQuestionScoresGiveTheAccuracies) {
  EvalOptions o;
  o.model_dir = kDemo;
  o.task = "gsm8k";
  o.limit = 3;
  o.max_gen_toks = 16;
  o.threads = 2;
  const EvalReport r = run_eval(o);
  ASSERT_EQ(r.n, 3);
  ASSERT_EQ(r.samples.strict_correct.size(), 3u);
  ASSERT_EQ(r.samples.flexible_correct.size(), 3u);
  double strict = 0, flexible = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_LE(r.samples.strict_correct[i], 1);
    strict += r.samples.strict_correct[i];
    flexible += r.samples.flexible_correct[i];
  }
  EXPECT_EQ(strict / 3, r.accuracy_strict);
  EXPECT_EQ(flexible / 3, r.accuracy_flexible);
  EXPECT_TRUE(r.samples.token_nll.empty());
}

TEST(EvalSamples, KldPairsBothModelsNllsOnTheSameTokens) {
  EvalOptions o = demo_ppl(2);
  o.task = "kld";
  o.source_dir = kDemo;
  const EvalReport r = run_eval(o);
  ASSERT_EQ(r.samples.token_nll.size(), 254u);
  ASSERT_EQ(r.samples.source_token_nll.size(), 254u);
  EXPECT_EQ(r.samples.token_nll, r.samples.source_token_nll);  // the model against itself
  EXPECT_NEAR(std::exp(mean(r.samples.token_nll)) / r.kld.ppl_quantized, 1.0, 1e-9);
  // The same tokens as a ppl run of the model.
  const EvalReport p = run_eval(demo_ppl(2));
  for (size_t i = 0; i < 254; ++i) EXPECT_NEAR(p.samples.token_nll[i], r.samples.token_nll[i], 1e-9) << i;
}

TEST(EvalSamples, TokenizerDirIsUsedForBothRuns) {
  test::TempDir tmp;
  EvalOptions o = demo_ppl(1);
  o.tokenizer_dir = tmp.path().string();  // no tokenizer there
  EXPECT_EQ(test::catch_error([&] { run_eval(o); }).kind(), ErrorKind::kNotFound);
}

TEST(EvalSamples, StageSaysWhereARunFailed) {
  EvalStage stage = EvalStage::kScore;
  EvalOptions o = demo_ppl(1);
  o.stage = &stage;
  o.dataset = "/nonexistent/text.txt";
  test::catch_error([&] { run_eval(o); });
  EXPECT_EQ(stage, EvalStage::kPrepare);

  test::TempDir tmp;
  o = demo_ppl(1);
  o.stage = &stage;
  o.model_dir = (tmp.path() / "missing").string();
  test::catch_error([&] { run_eval(o); });
  EXPECT_EQ(stage, EvalStage::kLoadModel);

  o = demo_ppl(1);
  o.stage = &stage;
  o.task = "kld";
  o.source_dir = (tmp.path() / "missing").string();
  test::catch_error([&] { run_eval(o); });
  EXPECT_EQ(stage, EvalStage::kLoadSource);

  o = demo_ppl(1);
  o.stage = &stage;
  run_eval(o);
  EXPECT_EQ(stage, EvalStage::kScore);
}

}  // namespace
}  // namespace qloom::eval
