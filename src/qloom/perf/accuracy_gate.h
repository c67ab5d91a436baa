// accuracy_gate: the real accuracy gate of `qloom perf` — the base model's
// and the quantized model's scores on the same samples (two TaskScores,
// task_score.h), the relative gap between them, its standard error, and
// whether it is within --accuracy-gap.
//
// Rules:
//   higher is better (gsm8k, multiple choice):
//       gap = max(0, (base - quant) / base); a base of 0 gives 0 when the
//       quantized model is no worse, else 1 (noted)
//   lower is better (perplexity):
//       gap = max(0, (quant - base) / base) = max(0, ppl_q / ppl_b - 1)
//   kld: gap = the quantized model's mean KL divergence against the base
//       (nats per token; the base scores 0 by definition, so baseline = 0,
//       quantized = gap); stderr = the kld run's standard error of that mean.
//   passed iff gap <= accuracy_gap (a gap exactly at the threshold passes).
// Pairing: both samples files must agree on every task_score.h pairing_keys()
// entry (task, metric, data set and its sha256, windows / questions used,
// seq_len, protocol, tokenizer sha256, n, ...); a mismatch throws Error
// kInvalidInput naming both files and the key. The gap's stderr comes from
// the per-sample differences (agent/eval_gap.h paired_ppl_gap /
// paired_accuracy_gap). For kld the quantized run's reference must be the
// baseline's model. The note also carries the 95% verdict eval_gap's judge()
// gives (pass / fail / unresolved: the sample size cannot tell), for the
// report; `passed` is the rule above only.
//
// Errors: kUsage for a negative / non-finite accuracy_gap; kInvalidInput /
// kNotFound for unreadable, inconsistent or unpairable samples files.
// Thread-safety: reads files only; no shared state.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "qloom/perf/task_score.h"

namespace qloom::perf {

struct AccuracyValidation {
  std::string task, metric;
  double baseline = 0, quantized = 0;  // the two headline scores
  double gap = 0;
  bool passed = false;
  int64_t n = 0;        // paired samples: tokens (ppl, kld) or questions / documents
  double stderr_ = 0;   // of the gap
  double threshold = 0; // --accuracy-gap
  std::string note;     // the rule applied, the 95% verdict, the zero-base rule ("" never)
};

AccuracyValidation gate(const TaskScore& baseline, const TaskScore& quantized, double accuracy_gap);

// JSON keys in this order: task, metric, baseline, quantized, gap, passed, n,
// stderr, threshold, note. from_json throws kInvalidInput naming `file` and
// the field for a missing or mistyped one.
nlohmann::ordered_json to_json(const AccuracyValidation& v);
AccuracyValidation accuracy_validation_from_json(const nlohmann::json& j, const std::string& file);

}  // namespace qloom::perf
