// run_eval: everything `qloom eval` does, as one library call. Loads the
// model(s) with load_for_eval (so each is evaluated as its checkpoint
// computes), the tokenizer (the model directory's; for kld the quantized
// directory's, else the source's), the data set, applies --limit and
// --time_budget, drives the progress line, and returns the report.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "qloom/eval/eval_report.h"

namespace qloom::eval {

struct EvalOptions {
  std::string model_dir;
  std::string source_dir;     // kld: the reference model (required)
  std::string task;           // "ppl", "kld", "gsm8k"
  std::string dataset;        // empty: wikitext2 (ppl/kld) or gsm8k
  std::string protocol = "quark";
  int64_t seq_len = 0;        // 0: the protocol's default for the model
  std::optional<int64_t> limit;   // windows (ppl/kld) or questions (gsm8k)
  double time_budget = 0;     // seconds; <= 0: none
  unsigned threads = 0;       // 0: all cores
  int64_t max_gen_toks = 256; // gsm8k
  std::ostream* log = nullptr;  // progress and notes (stderr in the CLI)
  bool log_is_tty = false;
};

// Throws qloom::Error: kUsage for bad options (unknown task/protocol, missing
// --source for kld, non-positive --limit), kNotFound for missing data sets or
// model files, kInvalidInput for unusable data.
EvalReport run_eval(const EvalOptions& options);

}  // namespace qloom::eval
