// Perplexity: windows of both protocols, NLL / ppl / stderr maths.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/fake_model.h"
#include "qloom/eval/perplexity.h"
#include "support/expect_error.h"

namespace qloom::eval {
namespace {

TEST(PplWindows, QuarkNonOverlappingLastPartialDropped) {
  const auto w = make_windows(Protocol::kQuark, 11, 4, 1);
  ASSERT_EQ(w.size(), 2u);  // 11 // 4
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[1].begin, 4);
  EXPECT_EQ(w[1].length, 4);
  EXPECT_EQ(w[0].first_target, 1);
  EXPECT_EQ(w[0].scored(), 3);  // every position but the first is predicted
  EXPECT_FALSE(w[0].bos);       // Quark inserts no BOS
  EXPECT_EQ(test::catch_error([] { make_windows(Protocol::kQuark, 3, 4, 1); }).kind(),
            ErrorKind::kInvalidInput);
}

TEST(PplWindows, LlamaCppScoresSecondHalfWithBos) {
  const auto w = make_windows(Protocol::kLlamaCpp, 1100, 512, 1);
  ASSERT_EQ(w.size(), 2u);  // 1100 / 512
  EXPECT_EQ(w[1].begin, 512);
  EXPECT_EQ(w[0].first_target, 257);  // first = n_ctx/2 = 256 predicts token 257
  EXPECT_EQ(w[0].scored(), 255);      // n_ctx - first - 1
  ASSERT_TRUE(w[1].bos);
  EXPECT_EQ(*w[1].bos, 1);
  // llama.cpp needs at least 2*n_ctx tokens.
  EXPECT_EQ(test::catch_error([] { make_windows(Protocol::kLlamaCpp, 1023, 512, 1); }).kind(),
            ErrorKind::kInvalidInput);
  const auto odd = make_windows(Protocol::kLlamaCpp, 10, 5, std::nullopt);
  EXPECT_EQ(odd[0].first_target, 3);  // first = 5/2 = 2
  EXPECT_EQ(odd[0].scored(), 2);
  EXPECT_FALSE(odd[0].bos);
}

TEST(PplWindows, WindowTokensReplaceFirstWithBos) {
  const std::vector<int32_t> doc = {7, 8, 9, 10, 11, 12};
  const Window w{3, 3, 2, 1};
  EXPECT_EQ(window_tokens(doc, w), (std::vector<int32_t>{1, 11, 12}));
  const Window q{0, 3, 1, std::nullopt};
  EXPECT_EQ(window_tokens(doc, q), (std::vector<int32_t>{7, 8, 9}));
}

TEST(PplWindows, DefaultSeqLen) {
  EXPECT_EQ(default_seq_len(Protocol::kQuark, 512), 512);
  EXPECT_EQ(default_seq_len(Protocol::kQuark, 131072), 2048);
  EXPECT_EQ(default_seq_len(Protocol::kQuark, 0), 2048);
  EXPECT_EQ(default_seq_len(Protocol::kLlamaCpp, 4096), 512);
  EXPECT_EQ(parse_protocol("llamacpp"), Protocol::kLlamaCpp);
  EXPECT_EQ(test::catch_error([] { parse_protocol("vllm"); }).kind(), ErrorKind::kUsage);
}

TEST(PplMaths, TokenNllOfTwoWayDistribution) {
  // softmax(0, ln 3) = (1/4, 3/4)
  const float logits[2] = {0.0f, float(std::log(3.0))};
  EXPECT_NEAR(token_nll(logits, 2, 0), std::log(4.0), 1e-6);
  EXPECT_NEAR(token_nll(logits, 2, 1), std::log(4.0 / 3.0), 1e-6);
  const float big[3] = {1000.0f, 1000.0f, 1000.0f};  // max subtraction: no overflow
  EXPECT_NEAR(token_nll(big, 3, 2), std::log(3.0), 1e-9);
}

TEST(PplMaths, PplAndStderrAsLlamaPerplexity) {
  NllStats s;
  for (double v : {1.0, 2.0, 3.0, 4.0}) s.add(v);
  EXPECT_DOUBLE_EQ(s.mean(), 2.5);
  EXPECT_NEAR(s.ppl(), std::exp(2.5), 1e-12);
  // v = E[x^2] - m^2 = 7.5 - 6.25 = 1.25; stderr = ppl * sqrt(v / (N-1))
  EXPECT_NEAR(s.ppl_stderr(), std::exp(2.5) * std::sqrt(1.25 / 3.0), 1e-12);
  NllStats one;
  one.add(1.0);
  EXPECT_EQ(one.ppl_stderr(), 0.0);
}

TEST(PplMaths, ScoreWindowUsesShiftedTargets) {
  // vocab 2, every row softmax (1/4, 3/4); doc {1, 0, 1}: targets 0 then 1.
  const float l3 = float(std::log(3.0));
  const std::vector<float> logits = {0, l3, 0, l3, 0, l3};
  const std::vector<int32_t> doc = {1, 0, 1};
  const NllStats s = score_window(doc, Window{0, 3, 1, std::nullopt}, logits.data(), 2);
  EXPECT_EQ(s.count, 2);
  EXPECT_NEAR(s.sum, std::log(4.0) + std::log(4.0 / 3.0), 1e-6);
}

TEST(PplRun, UniformModelGivesVocabPerplexity) {
  test::FakeModel m(8, [](int32_t, int64_t, float* row) {
    for (int i = 0; i < 8; ++i) row[i] = 0.5f;
  });
  std::vector<int32_t> doc(40);
  for (size_t i = 0; i < doc.size(); ++i) doc[i] = int32_t(i % 8);
  const auto windows = make_windows(Protocol::kQuark, 40, 16, 1);
  const PplResult r = run_perplexity(m, nullptr, doc, windows);
  EXPECT_EQ(r.windows, 2);
  EXPECT_EQ(r.tokens_scored, 30);
  EXPECT_NEAR(r.nll.ppl(), 8.0, 1e-5);
  EXPECT_EQ(m.forward_calls, 2);  // one forward per window
  // on_window returning false stops early (--limit / --time_budget)
  const PplResult one = run_perplexity(m, nullptr, doc, windows, [](int64_t) { return false; });
  EXPECT_EQ(one.windows, 1);
}

TEST(PplRun, BosReplacementOnlyChangesInputs) {
  // The model predicts the next token perfectly from the current one; with the
  // llamacpp protocol the BOS at position 0 is never a target.
  test::FakeModel m(4, [](int32_t tok, int64_t, float* row) {
    for (int i = 0; i < 4; ++i) row[i] = (i == (tok + 1) % 4) ? 20.0f : 0.0f;
  });
  std::vector<int32_t> doc(16);
  for (size_t i = 0; i < doc.size(); ++i) doc[i] = int32_t(i % 4);
  const auto windows = make_windows(Protocol::kLlamaCpp, 16, 8, 3);
  const PplResult r = run_perplexity(m, nullptr, doc, windows);
  EXPECT_EQ(r.tokens_scored, 2 * 3);
  EXPECT_LT(r.nll.ppl(), 1.0001);
}

}  // namespace
}  // namespace qloom::eval
