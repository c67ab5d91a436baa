// parse_eval_headline: qloom's own .md headline line and tables, and
// lm-eval's results table as `lm_eval --model ... --tasks ...` prints it.
#include "qloom/agent/eval_headline.h"

#include <gtest/gtest.h>

#include "qloom/agent/eval_phase.h"

namespace qloom::agent {
namespace {

const char* kLmEval =
    "hf (pretrained=/m), gen_kwargs: (None), limit: 400.0, num_fewshot: None, batch_size: 16\n"
    "|  Tasks  |Version|Filter|n-shot| Metric |   |Value |   |Stderr|\n"
    "|---------|------:|------|-----:|--------|---|-----:|---|-----:|\n"
    "|hellaswag|      1|none  |     0|acc     |↑  |0.3625|±  |0.0241|\n"
    "|         |       |none  |     0|acc_norm|↑  |0.4175|±  |0.0247|\n"
    "\n"
    "|Tasks|Version|     Filter     |n-shot|  Metric   |   |Value|   |Stderr|\n"
    "|-----|------:|----------------|-----:|-----------|---|----:|---|-----:|\n"
    "|gsm8k|      3|flexible-extract|     5|exact_match|↑  |0.025|±  |0.0043|\n"
    "|     |       |strict-match    |     5|exact_match|↑  |0.012|±  |0.0030|\n"
    "|mmlu |      2|none  |     |acc   |↑  |0.2550|±  |0.0037|\n";

TEST(EvalHeadline, ReadsLmEvalTables) {
  const auto an = parse_eval_headline(kLmEval, resolve_eval_metric("hellaswag", ""));
  ASSERT_TRUE(an);
  EXPECT_DOUBLE_EQ(an->value, 0.4175);
  EXPECT_EQ(an->source, "lm-eval table");
  EXPECT_DOUBLE_EQ(parse_eval_headline(kLmEval, resolve_eval_metric("hellaswag_acc", ""))->value, 0.3625);
  EXPECT_DOUBLE_EQ(parse_eval_headline(kLmEval, resolve_eval_metric("gsm8k", ""))->value, 0.012);
  EXPECT_DOUBLE_EQ(parse_eval_headline(kLmEval, resolve_eval_metric("gsm8k_flexible", ""))->value, 0.025);
  EXPECT_DOUBLE_EQ(parse_eval_headline(kLmEval, resolve_eval_metric("mmlu", ""))->value, 0.2550);
  EXPECT_FALSE(parse_eval_headline(kLmEval, resolve_eval_metric("arc_easy", "")));
  EXPECT_FALSE(parse_eval_headline(kLmEval, resolve_eval_metric("ppl", "")));  // no token perplexity there
}

TEST(EvalHeadline, ReadsQloomsHeadlineLineAndTable) {
  const std::string md =
      "# Source model evaluation\n\n**Accuracy:** 0.4650\n\n| Task | Metric | Value | Stderr |\n"
      "|------|--------|------:|-------:|\n| hellaswag | acc | 0.3950 | 0.0347 |\n";
  const auto h = parse_eval_headline(md, resolve_eval_metric("hellaswag", ""));
  ASSERT_TRUE(h);
  EXPECT_DOUBLE_EQ(h->value, 0.4650);
  EXPECT_EQ(h->source, "headline line");
  EXPECT_FALSE(parse_eval_headline("**Accuracy:** 0.5\n", resolve_eval_metric("ppl", "")));  // wrong kind
  EXPECT_DOUBLE_EQ(parse_eval_headline("**Perplexity:** 12.25\n", resolve_eval_metric("ppl", ""))->value, 12.25);
  const std::string table_only = "| Task | Metric | Value | Stderr |\n|---|---|--:|--:|\n| hellaswag | acc_norm | 0.4 | 0.1 |\n";
  EXPECT_EQ(parse_eval_headline(table_only, resolve_eval_metric("hellaswag", ""))->source, "qloom table");
  EXPECT_FALSE(parse_eval_headline("no numbers here", resolve_eval_metric("gsm8k", "")));
}

}  // namespace
}  // namespace qloom::agent
