// The headline score of an evaluation .md (source_eval.md /
// quantized_eval.md), as seed 000 §5.2 reads it: the first "**Accuracy:** x"
// / "**Perplexity:** x" line, or a row of a results table in lm-eval's
// format (| Tasks | Version | Filter | n-shot | Metric | | Value | | Stderr |,
// a blank Tasks cell continuing the task above) or qloom eval's
// (| Task | Metric | Value | Stderr |).
// Table rows match the metric's task (lm-eval's group or subtask name
// starting with it, e.g. mmlu_*) and headline: acc / acc_norm; gsm8k
// exact_match with filter strict-match or flexible-extract. lm-eval's
// perplexity tasks report word / byte perplexity, not qloom's token
// perplexity, so a table never gives a ppl headline.
#pragma once

#include <optional>
#include <string>

namespace qloom::agent {

struct EvalMetric;

struct Headline {
  double value = 0;
  std::string source;  // "headline line" | "lm-eval table" | "qloom table"
};

std::optional<Headline> parse_eval_headline(const std::string& markdown, const EvalMetric& m);

}  // namespace qloom::agent
