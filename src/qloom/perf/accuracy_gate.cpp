#include "qloom/perf/accuracy_gate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "qloom/core/format.h"
#include "qloom/agent/eval_gap.h"
#include "qloom/core/error.h"
#include "qloom/perf/task_score_internal.h"

namespace qloom::perf {
namespace {

using json = nlohmann::ordered_json;

std::string both_files(const TaskScore& b, const TaskScore& q) {
  return b.samples_path.string() + " (baseline) and " + q.samples_path.string() + " (quantized)";
}

Error unpairable(const TaskScore& b, const TaskScore& q, const std::string& key, const std::string& what) {
  return Error(ErrorKind::kInvalidInput, both_files(b, q), key, "cannot pair the two runs: " + what,
               "score both models with the same gate spec (task, data set, limit, tokenizer) and gate again");
}

// The samples file behind a TaskScore, which must say what the TaskScore says.
TaskSamples samples_of(const TaskScore& s, const char* role) {
  if (s.samples_path.empty())
    throw Error(ErrorKind::kUsage, "", std::string(role) + ".samples_path", "the task score has no samples file");
  TaskSamples t = read_task_samples(s.samples_path);
  const std::string file = s.samples_path.string();
  if (t.header["task"] != s.task || t.header["metric"] != s.metric || t.n != s.n ||
      std::fabs(t.score - s.score) > 1e-9 * std::max(1.0, std::fabs(s.score)))
    throw Error(ErrorKind::kInvalidInput, file, role,
                "the " + std::string(role) + " task score (" + s.task + " " + s.metric + " " + format_printf("%.6g", s.score) +
                    ", n " + std::to_string(s.n) + ") is not what its samples file holds (" +
                    t.header["task"].get<std::string>() + " " + t.header["metric"].get<std::string>() + " " +
                    format_printf("%.6g", t.score) + ", n " + std::to_string(t.n) + ")",
                "reload the score with load_task_score, or score the model again");
  return t;
}

AccuracyValidation kld_gate(const TaskScore& b, const TaskScore& q, const AccuracyValidation& base) {
  if (b.reference.empty() || b.reference != b.model || b.score != 0 || b.n != 0)
    throw unpairable(b, q, "reference", "the kld baseline must be the base model scored against itself (score 0), got " +
                                            b.model + " against " + (b.reference.empty() ? "nothing" : b.reference));
  if (q.reference != b.model)
    throw unpairable(b, q, "reference", "the quantized kld run is against " + q.reference + ", not the baseline's model " +
                                            b.model);
  samples_of(b, "baseline");
  const TaskSamples t = samples_of(q, "quantized");
  if (t.n < 1) throw unpairable(b, q, "n", "the quantized kld run scored no tokens");
  AccuracyValidation v = base;
  v.baseline = 0;
  v.quantized = t.score;
  v.gap = std::max(0.0, t.score);
  v.stderr_ = t.stderr_;
  v.n = t.n;
  v.passed = v.gap <= v.threshold;
  v.note = "kld: gap = mean KL divergence of the quantized model against the base, " + format_printf("%.6f", v.gap) + " +/- " +
           format_printf("%.6f", v.stderr_) + " nats per token over " + std::to_string(v.n) +
           " tokens; the base scores 0 by definition";
  return v;
}

std::string header_value(const TaskSamples& t, const std::string& key) { return t.header[key].dump(); }

}  // namespace

AccuracyValidation gate(const TaskScore& baseline, const TaskScore& quantized, double accuracy_gap) {
  if (!std::isfinite(accuracy_gap) || accuracy_gap < 0)
    throw Error(ErrorKind::kUsage, "", "--accuracy-gap", "must be a non-negative number, got " + format_printf("%g", accuracy_gap),
                "e.g. 0.02 for a 2% relative gap (\"2%\" is read as 0.02)");
  if (baseline.task != quantized.task || baseline.metric != quantized.metric)
    throw unpairable(baseline, quantized, "task", "the baseline is " + baseline.task + " " + baseline.metric +
                                                      ", the quantized run " + quantized.task + " " + quantized.metric);
  AccuracyValidation v;
  v.task = baseline.task;
  v.metric = baseline.metric;
  v.threshold = accuracy_gap;
  if (baseline.task == "kld") return kld_gate(baseline, quantized, v);

  const TaskSamples b = samples_of(baseline, "baseline");
  const TaskSamples q = samples_of(quantized, "quantized");
  for (const std::string& key : pairing_keys())
    if (b.header[key] != q.header[key])
      throw unpairable(baseline, quantized, key,
                       key + " differs: " + header_value(b, key) + " vs " + header_value(q, key));
  const bool ppl = baseline.task == "ppl";
  const agent::GapEstimate g = ppl ? agent::paired_ppl_gap(v.metric, b.values, q.values)
                                   : agent::paired_accuracy_gap(v.metric, b.values, q.values);
  v.baseline = g.source_score;
  v.quantized = g.quantized_score;
  v.gap = g.relative_gap;
  v.stderr_ = g.gap_stderr;
  v.n = int64_t(g.n);
  v.passed = v.gap <= v.threshold;
  v.note = std::string(ppl ? "perplexity (lower is better): gap = max(0, (quantized - baseline) / baseline)"
                           : "higher is better: gap = max(0, (baseline - quantized) / baseline)") +
           "; paired over " + std::to_string(v.n) + (ppl ? " tokens" : " " + b.header["unit"].get<std::string>()) +
           "; 95% verdict: " + agent::verdict_name(agent::judge(g, v.threshold));
  if (!g.note.empty()) v.note += "; " + g.note;
  return v;
}

nlohmann::ordered_json to_json(const AccuracyValidation& v) {
  json j;
  j["task"] = v.task;
  j["metric"] = v.metric;
  j["baseline"] = v.baseline;
  j["quantized"] = v.quantized;
  j["gap"] = v.gap;
  j["passed"] = v.passed;
  j["n"] = v.n;
  j["stderr"] = v.stderr_;
  j["threshold"] = v.threshold;
  j["note"] = v.note;
  return j;
}

AccuracyValidation accuracy_validation_from_json(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) throw Error(ErrorKind::kInvalidInput, file, "accuracy_validation", "must be a JSON object");
  AccuracyValidation v;
  v.task = field<std::string>(j, "task", file);
  v.metric = field<std::string>(j, "metric", file);
  v.baseline = field<double>(j, "baseline", file);
  v.quantized = field<double>(j, "quantized", file);
  v.gap = field<double>(j, "gap", file);
  v.passed = field<bool>(j, "passed", file);
  v.n = field<int64_t>(j, "n", file);
  v.stderr_ = field<double>(j, "stderr", file);
  v.threshold = field<double>(j, "threshold", file);
  v.note = field<std::string>(j, "note", file);
  return v;
}

}  // namespace qloom::perf
