// GSM8K: lm-eval prompt building (few-shot sampling bit-exact with CPython's
// random), the strict / flexible extraction filters, exact_match.
#include <gtest/gtest.h>

#include "eval/fake_model.h"
#include "qloom/eval/datasets.h"
#include "qloom/eval/gsm8k.h"
#include "qloom/eval/py_random.h"

namespace qloom::eval {
namespace {

TEST(Gsm8kPyRandom, MatchesCPython) {
  // python3 -c "import random; r=random.Random(1234); print([r.getrandbits(32) for _ in range(3)])"
  PyRandom r(1234);
  EXPECT_EQ(r.genrand_uint32(), 4150886329u);
  EXPECT_EQ(r.genrand_uint32(), 3342196574u);
  EXPECT_EQ(r.genrand_uint32(), 1892932127u);
  // r = random.Random(1234); r.sample(range(7473), 5) twice
  PyRandom s(1234);
  EXPECT_EQ(s.sample(7473, 5), (std::vector<uint64_t>{6374, 3610, 957, 61, 742}));
  EXPECT_EQ(s.sample(7473, 5), (std::vector<uint64_t>{7462, 6610, 4769, 286, 5501}));
  // Pool branch (n <= setsize) and a multi-word seed:
  // r = random.Random(2**40+7); r.sample(range(10),5), r.sample(range(100),8)
  PyRandom t((uint64_t(1) << 40) + 7);
  EXPECT_EQ(t.sample(10, 5), (std::vector<uint64_t>{9, 7, 4, 8, 1}));
  EXPECT_EQ(t.sample(100, 8), (std::vector<uint64_t>{66, 48, 92, 46, 50, 56, 57, 47}));
}

TEST(Gsm8kPrompt, FiveShotAsLmEval) {
  const auto test = load_gsm8k_jsonl(bundled_file("gsm8k/test.jsonl"));
  const auto train = load_gsm8k_jsonl(bundled_file("gsm8k/train.jsonl"));
  const auto prompts = build_gsm8k_prompts(test, train, 2);
  ASSERT_EQ(prompts.size(), 2u);
  auto shot = [&](size_t i) {
    return "Question: " + train[i].question + "\nAnswer: " + train[i].answer + "\n\n";
  };
  std::string p0;
  for (size_t i : {6374, 3610, 957, 61, 742}) p0 += shot(i);
  p0 += "Question: " + test[0].question + "\nAnswer:";
  EXPECT_EQ(prompts[0], p0);
  EXPECT_EQ(prompts[0].size(), 3189u);  // len(context.encode()) of the same Python prompt
  std::string p1;
  for (size_t i : {7462, 6610, 4769, 286, 5501}) p1 += shot(i);
  p1 += "Question: " + test[1].question + "\nAnswer:";
  EXPECT_EQ(prompts[1], p1);
}

TEST(Gsm8kFilters, StrictMatch) {
  EXPECT_EQ(gsm8k_extract_strict("so 5+3=8\n#### 8"), "8");
  EXPECT_EQ(gsm8k_extract_strict("#### -1,234.5 dollars"), "-1,234.5");
  EXPECT_EQ(gsm8k_extract_strict("#### 3\n#### 4"), "3");  // take_first
  EXPECT_EQ(gsm8k_extract_strict("The answer is 42."), "[invalid]");
  EXPECT_EQ(gsm8k_extract_strict("#### $5"), "[invalid]");  // '$' not in the strict class
}

TEST(Gsm8kFilters, FlexibleExtractTakesLastNumber) {
  EXPECT_EQ(gsm8k_extract_flexible("3 apples and 4 pears make 7."), "7.");
  EXPECT_EQ(gsm8k_extract_flexible("It costs $1,250.00 in total"), "$1,250.00");
  EXPECT_EQ(gsm8k_extract_flexible("He lost -12 points"), "-12");
  EXPECT_EQ(gsm8k_extract_flexible("from 10 to 5"), "5");  // single digit: second group
  EXPECT_EQ(gsm8k_extract_flexible("no number here"), "[invalid]");
  EXPECT_EQ(gsm8k_extract_flexible("#### 72"), "72");
  EXPECT_EQ(gsm8k_extract_flexible("ends with a comma 1,"), "1,");
}

TEST(Gsm8kExactMatch, NormalisationAsLmEval) {
  const std::string ref = "Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72";
  EXPECT_EQ(gsm8k_normalize(ref), "72");
  EXPECT_TRUE(gsm8k_exact_match("72", ref));
  EXPECT_TRUE(gsm8k_exact_match("72.", ref));     // "\.$"
  EXPECT_TRUE(gsm8k_exact_match("$72", ref));     // "\$"
  EXPECT_FALSE(gsm8k_exact_match("72.0", ref));   // only one trailing '.' is dropped
  EXPECT_FALSE(gsm8k_exact_match("[invalid]", ref));
  EXPECT_TRUE(gsm8k_exact_match("1,234", "x\n#### 1234"));
  EXPECT_TRUE(gsm8k_exact_match("-5", "x\n#### -5"));
  EXPECT_FALSE(gsm8k_exact_match("5", "x\n#### -5"));
  EXPECT_EQ(gsm8k_normalize("a #### b #### C."), "c");  // up to the last "#### "
  EXPECT_EQ(gsm8k_normalize("7.\n"), "7\n");            // '$' also matches before a final \n
}

TEST(Gsm8kGenerate, CutAtEarliestStop) {
  const std::vector<std::string> stops = {"Question:", "</s>"};
  EXPECT_EQ(cut_at_stop("a 12\n\nQuestion: next", stops), "a 12\n\n");
  EXPECT_EQ(cut_at_stop("x</s>yQuestion:", stops), "x");
  EXPECT_EQ(cut_at_stop("plain", stops), "plain");
}

}  // namespace
}  // namespace qloom::eval
