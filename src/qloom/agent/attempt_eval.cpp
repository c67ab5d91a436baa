// The attempt's eval phase: the source and the quantized model scored on the
// plan's metric (agent/eval_phase.h), the relative gap gated against the
// threshold; a skipped evaluation is an outcome or an auto-recover note.
// See attempt_runner.h.
#include <algorithm>
#include <string>

#include "qloom/agent/attempt_runner.h"
#include "qloom/agent/eval_gap.h"
#include "qloom/agent/outcomes.h"
#include "qloom/core/format.h"

namespace qloom::agent::detail {

void AttemptRunner::phase_eval() {
  enter("eval");
  ws_.remove("eval_skipped.txt");
  if (!plan_.value("eval_requested", intent_.eval_requested.value)) {
    ws_.write_text("eval_skipped.txt", "evaluation not requested: the prompt asked to skip it\n");
    recovered("eval_env_unavailable", "evaluation skipped as the prompt asked");
    report_.eval_skipped = true;
    return;
  }
  check_eval_memory();
  const EvalPhaseOptions eo = eval_options();
  const EvalPhaseResult r = run_eval_phase(eo);
  if (r.skipped) {
    stop_or_note_eval_skip(r, eo);
    return;
  }
  record_eval(r);
}

// Both models are evaluated with fp32 weights (the quantized one
// dequantized): when that cannot fit the budget, eval_oom up front.
void AttemptRunner::check_eval_memory() {
  const auto budget = memory_budget();
  if (!budget) return;
  const uint64_t params = analysis_["model"].value("estimated_parameters", uint64_t(0));
  const uint64_t need = params * 4 * 2;
  if (need <= *budget) return;
  ws_.write_text("eval_skipped.txt", "oom: evaluating needs both models' fp32 weights, ~" + format_bytes(need) +
                                         ", more than the memory budget " + format_bytes(*budget) + "\n");
  report_.eval_skipped = true;
  report_.eval = {{"skipped", true}, {"reason", "oom: predicted " + format_bytes(need) + " > " + format_bytes(*budget)}};
  throw StopAttempt{"eval_oom", "evaluation needs ~" + format_bytes(need) + " for both models' fp32 weights, more than the memory budget " +
                                    format_bytes(*budget) + "; no fix this workspace can apply (raise the limit)",
                    {}};
}

EvalPhaseOptions AttemptRunner::eval_options() const {
  EvalPhaseOptions eo;
  eo.workspace = ws_.dir();
  eo.source_dir = source_dir_;
  eo.quantized_dir = quantized_dir_;
  eo.metric_name = plan_.value("metric_name", intent_.metric_name.value);
  eo.eval_dataset = plan_.value("eval_dataset", std::string());
  if (plan_.contains("eval_limit") && plan_["eval_limit"].is_number_integer()) eo.limit = plan_["eval_limit"].get<int64_t>();
  eo.time_budget_s = fix_eval_budget_ ? *fix_eval_budget_ : opts_.eval_time_budget_s;
  eo.caller_threshold = opts_.acceptable_eval_gap;
  eo.threads = opts_.threads;
  eo.source_server = opts_.eval_server;
  eo.quantized_server = opts_.quantized_eval_server;
  eo.server_api_key = opts_.eval_server_api_key;
  eo.log = &log_;
  eo.log_is_tty = opts_.log_is_tty;
  return eo;
}

// The eval phase skipped: its outcome stops the attempt (eval_oom with a
// smaller evaluation as the fix), unless it is an auto-recover one.
void AttemptRunner::stop_or_note_eval_skip(const EvalPhaseResult& r, const EvalPhaseOptions& eo) {
  report_.eval_skipped = true;
  report_.eval = {{"skipped", true}, {"reason", r.skip_reason}};
  const OutcomeInfo* c = find_outcome(r.skip_outcome);
  if (c && c->cls != OutcomeClass::kAutoRecover) {
    FixHypothesis f;
    std::optional<FixHypothesis> fix;
    if (c->id == "eval_oom") {
      f.root_cause = "Evaluation ran out of memory.";
      f.actions = {"evaluate with 1 worker thread and half the time budget (fewer windows / questions)"};
      f.risk = "a smaller sample widens the gap's standard error; the gate may stay unresolved";
      f.plan_overrides = {{"threads", 1}, {"eval_time_budget_s", std::max(10.0, eo.time_budget_s / 2)}};
      fix = f;
    }
    throw StopAttempt{std::string(c->id), r.skip_reason, fix};
  }
  recovered("eval_env_unavailable", r.skip_reason);
}

// The gap and the gate's verdict: a failed gate stops the attempt.
void AttemptRunner::record_eval(const EvalPhaseResult& r) {
  report_.eval = {{"metric_name", r.gap.metric_name},
                  {"source_score", r.gap.source_score},
                  {"quantized_score", r.gap.quantized_score},
                  {"relative_gap", r.gap.relative_gap},
                  {"gap_stderr", r.gap.gap_stderr},
                  {"n", r.gap.n},
                  {"threshold", r.threshold.value},
                  {"threshold_source", r.threshold.source},
                  {"verdict", verdict_name(r.verdict)},
                  {"source_cached", r.source_cached}};
  if (r.verdict == GateVerdict::kFail)
    throw StopAttempt{"eval_gap_exceeded", "relative_gap " + std::to_string(r.gap.relative_gap) + " (± " +
                                               std::to_string(r.gap.gap_stderr) + ") > threshold " +
                                               std::to_string(r.threshold.value) + " (" + r.threshold.source + ")",
                      {}};
  if (r.verdict == GateVerdict::kUnresolved) report_.eval_unresolved = true;
}

}  // namespace qloom::agent::detail
