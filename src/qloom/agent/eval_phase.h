// The eval phase of `qloom run` (seed 000 §5, mission.md §7): score the source
// and the quantized model on exactly the same samples with the native engine
// (eval/run_eval.h), pair the per-sample scores, and write
//
//   <workspace>/source_eval.md             source headline + lm-eval table.
//                                          Cached across attempts (below).
//   <workspace>/source_eval_samples.json   its per-sample scores + cache key.
//   <workspace>/quantized_eval.md          the quantized model's, every attempt.
//   <workspace>/quantized_eval_samples.json
//   <workspace>/eval_report.json           eval_gap.h's eval_report_json (the
//                                          seed's six keys first) + the extras
//                                          below, validated against
//                                          schemas/eval_report.schema.json.
// or, when evaluation cannot run, <workspace>/eval_skipped.txt (one line).
//
// Metrics (resolve_eval_metric; names are matched case-insensitively, with
// ' ' and '-' read as '_'):
//   ""/gsm8k/gsm/gsm8k_strict lm-eval's gsm8k, 5-shot, greedy; headline
//                           exact_match,strict-match (lm-eval's first filter,
//                           the row it lists first). metric_name "gsm8k".
//   gsm8k_flexible          the same run; headline exact_match,flexible-extract.
//   ppl/perplexity/word_perplexity/wikitext/wikitext2/wikitext2_ppl/tinystories(_ppl)
//                           perplexity (Quark protocol: non-overlapping windows
//                           of min(2048, max_position_embeddings) tokens unless
//                           seq_len says otherwise) on the bundled wikitext-2
//                           test (tinystories when the metric or eval_dataset
//                           names it); scores paired token by token.
//                           metric_name "ppl".
//   kld/kl/kl_div/kl_divergence
//                           the gate is on perplexity over the same windows:
//                           source_score = source ppl, quantized_score =
//                           quantized ppl (relative gap = ppl ratio - 1, paired
//                           per token), because a relative gap against the
//                           source's own KLD (0) is meaningless. The quantized
//                           run is llama-perplexity's --kl-divergence run (both
//                           models loaded together, so the source is run
//                           again for its logits); the KLD statistics go into
//                           quantized_eval.md and eval_report.json ("kld").
//                           metric_name "kld".
//   anything else (mmlu, hellaswag, arc, ...): no offline evaluator ->
//                           eval_skipped.txt (#22 eval_env_unavailable).
// eval_dataset: "" = the metric's default; wikitext2 (also wiki, wikitext,
// wikitext-2, wikitext-2-raw(-v1)) or tinystories for ppl/kld, gsm8k for gsm8k,
// or an existing local file (.txt document for ppl/kld, .jsonl of
// {question, answer} for gsm8k). Other names (c4, pileval, ...) are not
// available offline -> eval_skipped.txt (#22).
//
// Headlines (the first bold line of each .md, which seed §5.2 parses):
//   "**Accuracy:** 0.5120"    gsm8k (fraction correct, 4 decimals)
//   "**Perplexity:** 8.8543"  ppl and kld (4 decimals)
// followed by eval::render_table's lm-eval table and a list: model, metric,
// dataset, limit, n, backend, seconds, the samples file; then the run's notes
// (--limit / time budget decisions).
//
// Samples and budget: the source is run first, with `limit` (windows or
// questions; nullopt = all) and the time budget (eval/budget.h: the first
// window / question is timed and the count cut to fit). The count it ends
// with is then imposed on the quantized run (same first N samples, no
// budget), so both are scored on exactly the same samples; that count is the
// limit recorded (eval_report.json "limit", the .md "limit" line) — null /
// "none" when every sample of the data set was scored. Both runs use the
// source's tokenizer and the source's window length, so they score the same
// tokens. The budget bounds the source run; the quantized run takes about as
// long (kld: about twice, as it runs both models).
//
// Source cache: source_eval.md is NOT rerun when it exists (with a
// **Accuracy:** / **Perplexity:** headline) and source_eval_samples.json
// holds per-sample scores made with the same key: metric_name, task, dataset,
// protocol, seq_len, max_gen_toks, requested limit, time budget, and the
// source directory (absolute path, and the name, size and modification time
// of its *.safetensors / *.bin / *.json files). Otherwise both are removed
// and rewritten (samples file first, .md last, so an interrupted run is never
// mistaken for a cached one).
//
// Per-sample files (source_eval_samples.json, quantized_eval_samples.json),
// one JSON object: "format": "qloom-eval-samples/1", "role"
// ("source"|"quantized"), "model", "key" (above; source only), "metric_name",
// "task", "dataset", "unit" ("windows"|"questions"), "units_used",
// "units_total", "limit_used" (int or null), "seq_len", "protocol", "score",
// "n", then the scores: "token_nll" (ppl/kld: every scored token's NLL in
// order, exp(mean) = the ppl) or "strict_correct" / "flexible_correct"
// (gsm8k: 0/1 per question in order). Doubles are written round-trip exact.
//
// eval_report.json after the seed's keys and n, limit, source_stderr,
// quantized_stderr, gap_stderr (eval_report_json): "n_unit" ("tokens" |
// "questions"), "limit_unit" ("windows" | "questions"), "samples_total",
// "task", "headline" ("perplexity" | "exact_match,strict-match" |
// "exact_match,flexible-extract"), "direction" ("lower_is_better" |
// "higher_is_better"), "protocol" and "seq_len" (ppl/kld), "source_model",
// "quantized_model", "threshold", "threshold_source", "verdict", "notes"
// (e.g. eval_gap's zero-source rule: a source score of 0 gives gap 0 when the
// quantized model is no worse, else 1), and per task "secondary" (gsm8k: the
// other filter's source/quantized accuracy) or "kld" (kld: mean,
// mean_stderr, median, p99, max, top1_agreement). No timings: the same
// inputs give the same file.
//
// eval_skipped.txt (one line; outcomes.h's classifier reads substrings):
//   "oom: ..."               std::bad_alloc (or ENOMEM) in either run -> #29 eval_oom
//   "quantized_load: ..."    the quantized model cannot be loaded or run by the
//                            engine (load_for_eval / forward fails) -> #28
//   anything else            #22 eval_env_unavailable: unknown metric or data
//                            set, bundled data missing, the source model
//                            cannot be loaded or run.
// Text that is not ours (error messages, paths, metric names) is defused so it
// cannot change the class: in a #28 reason every "oom", in a #22 reason every
// "oom", "vllm", "sglang" and "quantized_load" (any case) gets a zero-width
// space (U+200B) after its first letter — "qloom" paths would otherwise read
// as out-of-memory.
//
// Per attempt, run_eval_phase first removes eval_skipped.txt,
// eval_report.json, quantized_eval.md and quantized_eval_samples.json left by
// an earlier attempt. It never writes last_phase.txt.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "qloom/agent/eval_gap.h"
#include "qloom/eval/run_eval.h"

namespace qloom::agent {

// Default per-model time budget of the eval phase (seconds).
inline constexpr double kDefaultEvalTimeBudgetSeconds = 300.0;

struct EvalPhaseOptions {
  std::filesystem::path workspace;      // must exist
  std::filesystem::path source_dir;     // the unquantized model
  std::filesystem::path quantized_dir;  // the Quark hf_format checkpoint
  std::string metric_name;              // "" = gsm8k (seed §5.2); see the table above
  std::string eval_dataset;             // "" = the metric's default
  std::optional<int64_t> limit;         // windows (ppl/kld) or questions (gsm8k); >= 1
  // Per model, seconds; <= 0: no budget. Bounds the source run; the quantized
  // run takes the source's final sample count.
  double time_budget_s = kDefaultEvalTimeBudgetSeconds;
  std::optional<double> caller_threshold;  // resolve_threshold's caller value
  unsigned threads = 0;                    // 0 = all cores
  std::ostream* log = nullptr;             // progress and notes; null = silent
  bool log_is_tty = false;
  // ppl / kld windowing: "quark" or "llamacpp"; seq_len 0 = the protocol's
  // default for the source model.
  std::string protocol = "quark";
  int64_t seq_len = 0;
  int64_t max_gen_toks = 256;  // gsm8k: most tokens generated per answer
  // Tier 3: score each model through an OpenAI-compatible server (vLLM,
  // SGLang, qloom serve) instead of the engine (gsm8k and the multiple-choice
  // tasks; ppl / kld stay in-process, noted). The local directories still
  // supply the tokenizers. eval_report.json's backend names the quantized
  // side's server kind ("vllm" when the server says it is vLLM).
  std::string source_server, quantized_server;
  std::string server_api_key;
};

// What a metric name and data set resolve to.
struct EvalMetric {
  // canonical: "gsm8k", "gsm8k_flexible", "ppl", "kld", a multiple-choice
  // task ("hellaswag", "arc_easy", ..., "mmlu"; "<task>_acc" when the headline
  // is acc for a task whose default is acc_norm); else the name as given
  std::string metric_name;
  std::string task;         // run_eval's task: "gsm8k", "ppl", "kld" or the MC task; "" when unavailable
  std::string dataset;      // run_eval's data set: "gsm8k", "wikitext2", "tinystories", "hellaswag" or a file path
  // "perplexity", "exact_match,strict-match", "exact_match,flexible-extract", "acc", "acc_norm"
  std::string headline;
  std::string unavailable;  // non-empty: why it cannot be evaluated offline (a #22 reason, defused)
};
// Never throws; unknown names come back with `unavailable` set.
EvalMetric resolve_eval_metric(const std::string& metric_name, const std::string& eval_dataset);

struct EvalPhaseResult {
  bool skipped = false;       // eval_skipped.txt was written; nothing below it is meaningful but metric
  std::string skip_outcome;   // "eval_env_unavailable" | "quantized_load_failed" | "eval_oom"
  std::string skip_reason;    // eval_skipped.txt's line (without the newline)
  EvalMetric metric;
  GapEstimate gap;            // paired: n = scored tokens (ppl/kld) or questions (gsm8k)
  Threshold threshold;        // resolve_threshold(caller_threshold, workspace)
  GateVerdict verdict = GateVerdict::kUnresolved;  // judge(gap, threshold.value)
  bool source_cached = false;            // source_eval.md was reused, the source not run
  std::optional<int64_t> limit_used;     // windows / questions both runs scored, when fewer than all
  int64_t samples_used = 0;              // windows / questions scored
  int64_t samples_total = 0;             // windows / questions the data set has
  double source_seconds = 0;             // 0 when cached
  double quantized_seconds = 0;
  std::vector<std::string> notes;        // limit / budget decisions, the zero-source rule
};

// The eval_skipped.txt line for an exception that eval::run_eval threw while
// evaluating the `role` model ("source" | "quantized") in `stage`, and the
// outcome id outcomes.h's classifier reads from it:
//   std::bad_alloc, or a qloom::Error whose text has strerror(ENOMEM)
//                                  -> "oom: ..."            eval_oom
//   quantized, kLoadModel / kScore -> "quantized_load: ..." quantized_load_failed
//   anything else (data, source)   -> a defused reason      eval_env_unavailable
// Rethrows what no class covers: qloom::Error kUsage / kInternal (a caller or
// qloom bug) and exceptions other than qloom::Error and std::bad_alloc.
struct EvalSkip {
  std::string outcome;  // "eval_oom" | "quantized_load_failed" | "eval_env_unavailable"
  std::string reason;   // one line
};
EvalSkip eval_skip_for(std::exception_ptr error, const std::string& role, eval::EvalStage stage);

// Runs the phase as the file comment says. Throws qloom::Error for what no
// eval_skipped.txt class covers: kUsage (limit < 1, empty paths, a missing
// workspace, a bad protocol), kInvalidInput (a malformed
// eval_gap_threshold.txt, source and quantized scoring different sample
// counts), kIo (a workspace file cannot be written).
EvalPhaseResult run_eval_phase(const EvalPhaseOptions& options);

}  // namespace qloom::agent
