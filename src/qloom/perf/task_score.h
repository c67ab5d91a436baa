// task_score: one model's score on the gate metric of `qloom perf`, written
// to a directory a later session (or a resumed one) can read back and pair
// against another model's run without re-running either.
//
// What is scored (resolve_gate_metric):
//   gsm8k (also gsm8k_strict)  -> metric "exact_match,strict-match"; higher is
//                                 better; limit 0 = 1319 questions (the whole
//                                 bundled test set, --gsm8k-num-samples)
//   gsm8k_flexible             -> "exact_match,flexible-extract"
//   ppl (wikitext2 by default) -> "perplexity"; lower is better; limit =
//                                 windows, 0 = every window of the data set
//   kld                        -> "kld_mean" (nats per token); lower is better;
//                                 the model is scored against spec.reference_dir
//                                 (the base model). The base model itself
//                                 scores 0 by definition and is not run.
//   a multiple-choice task     -> "acc_norm" where lm-eval reports it, else
//                                 "acc" ("<task>_acc" picks acc); higher is
//                                 better; limit = documents, 0 = all
// Names go through the agent's resolve_eval_metric (the same aliases `qloom
// run` accepts); an unknown name or a data set not available offline throws
// Error kUsage naming --eval-task / --dataset.
//
// The directory score_task writes (atomically: a staging directory renamed
// over out_dir, replacing an earlier one):
//   eval_report.json  eval::report_to_json of the run (absent for the kld base)
//   samples.json      "qloom-perf-samples/1": what the score is computed from,
//                     in sample order (kSamplesFile), plus what two runs must
//                     share to be paired: task, metric, dataset (+ sha256 of
//                     its files), unit, units_used, units_total, seq_len,
//                     protocol, max_gen_toks, tokenizer_sha256
//   score.json        to_json(TaskScore)
//
// Per-sample scores: ppl "token_nll" (every scored token's NLL, exp(mean) =
// the score); kld "token_nll" / "source_token_nll" (the same tokens under the
// model and the reference) with kld_mean / kld_mean_stderr; gsm8k
// "strict_correct" / "flexible_correct", multiple choice "acc_correct" /
// "acc_norm_correct" (0/1 per question or document). stderr: ppl
// score * sd(nll) / sqrt(n) (the delta method eval_gap uses); accuracy
// sd / sqrt(n) (sample sd, n - 1); kld: the kld run's mean stderr.
//
// Thread-safety: no shared state; two calls must not write the same out_dir.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/agent/eval_gap.h"
#include "qloom/eval/eval_report.h"

namespace qloom::perf {

inline constexpr const char* kSamplesFile = "samples.json";
inline constexpr const char* kScoreFile = "score.json";
inline constexpr const char* kEvalReportFile = "eval_report.json";
inline constexpr int64_t kGsm8kDefaultLimit = 1319;

struct GateSpec {
  std::string task = "ppl";  // gsm8k | ppl | kld | a multiple-choice task name (aliases as above)
  std::string dataset;       // "" = the task's default; a bundled name or a file
  int64_t limit = 0;         // 0 = the task default (gsm8k: 1319); < 0 is an error
  unsigned threads = 0;      // 0 = all cores
  // gsm8k / multiple choice through an OpenAI-compatible server (eval::EvalOptions).
  std::string server, api_key, served_model;
  std::string tokenizer_dir;  // "" = the model's; pass the base model's to both runs of a gate
  std::string reference_dir;  // kld: the base model (required for kld)
  int64_t seq_len = 0;        // ppl / kld windows; 0 = the protocol's default for the model
};

// What a GateSpec resolves to.
struct GateMetric {
  std::string task;     // run_eval's task: "gsm8k", "ppl", "kld" or the multiple-choice task
  std::string metric;   // "exact_match,strict-match", "perplexity", "kld_mean", "acc", ...
  std::string dataset;  // run_eval's data set (bundled name or absolute file)
  agent::MetricDirection direction = agent::MetricDirection::kHigherIsBetter;
  std::optional<int64_t> limit;  // the effective limit (nullopt: everything)
  std::string unit;     // "windows" | "questions" | "documents"
};
// Throws Error kUsage (unknown task, data set not available offline, limit < 0,
// kld without reference_dir).
GateMetric resolve_gate_metric(const GateSpec& spec);

// "higher_is_better" | "lower_is_better", and back (kInvalidInput otherwise).
const char* direction_name(agent::MetricDirection d);
agent::MetricDirection parse_direction(const std::string& name, const std::string& file);

struct TaskScore {
  std::string task;    // GateMetric::task
  std::string metric;  // GateMetric::metric
  agent::MetricDirection direction = agent::MetricDirection::kHigherIsBetter;
  double score = 0, stderr_ = 0;
  int64_t n = 0;  // per-sample scores: tokens (ppl, kld) or questions / documents
  std::filesystem::path samples_path;  // <out_dir>/samples.json, absolute
  std::string model;      // absolute model directory
  std::string reference;  // kld: the base model the KLD is against ("" otherwise)
  std::string dataset;
  int64_t units_used = 0, units_total = 0;  // windows / questions / documents
  double seconds = 0;        // the evaluation's wall time (0 for the kld base)
  std::string evaluated_at;  // UTC, "YYYY-mm-ddTHH:MM:SSZ"
};

// JSON keys in this order: task, metric, direction, score, stderr, n,
// samples_path, model, reference (null when ""), dataset, units_used,
// units_total, seconds, evaluated_at. from_json throws kInvalidInput naming
// `file` and the field for a missing or mistyped one.
nlohmann::ordered_json to_json(const TaskScore& s);
TaskScore task_score_from_json(const nlohmann::json& j, const std::string& file);

// Runs eval::run_eval for `model_dir` on the gate metric and writes out_dir.
// kld: model_dir == spec.reference_dir (the same directory) is the base
// itself: nothing runs, the score is 0. Throws what run_eval throws, kUsage
// as resolve_gate_metric, kIo when out_dir cannot be written.
TaskScore score_task(const std::filesystem::path& model_dir, const GateSpec& spec,
                     const std::filesystem::path& out_dir, std::ostream* log);

// score_task's second half: writes out_dir from a finished run's report
// (report.model / report.source name the models).
TaskScore record_task_score(const eval::EvalReport& report, const GateSpec& spec,
                            const std::filesystem::path& out_dir);

// Reads out_dir/score.json and validates it against out_dir/samples.json (the
// score recomputed from the samples must match). samples_path becomes
// out_dir/samples.json wherever the directory now lives. Throws kNotFound /
// kInvalidInput naming the file and field.
TaskScore load_task_score(const std::filesystem::path& out_dir);

// A samples.json read back, validated (format, sizes, finite values, 0/1).
struct TaskSamples {
  std::filesystem::path file;
  nlohmann::json header;            // every key but the per-sample arrays
  std::vector<double> values;       // the headline's per-sample scores (NLLs or 0/1)
  double score = 0, stderr_ = 0;    // recomputed from values (kld: as stored)
  int64_t n = 0;
};
TaskSamples read_task_samples(const std::filesystem::path& file);

// The keys two samples files must agree on to be paired (samples.json).
const std::vector<std::string>& pairing_keys();

}  // namespace qloom::perf
