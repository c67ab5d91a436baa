// The attempt's runner (internal to agent/attempt*.cpp; see attempt.h).
//
// One AttemptRunner drives the phases of one attempt; its member functions
// live in the file of their phase:
//   attempt.cpp           run loop, outcome recording, checkpoints, pre
//   attempt_intake.cpp    intake (model analysis)
//   attempt_plan.cpp      plan, fix overrides, manifest
//   attempt_exec.cpp      exec (the recorded quantize command), export
//   attempt_validate.cpp  validate (self-test, repairs, step outcomes), self-check
//   attempt_eval.cpp      eval
// A phase stops the attempt by throwing StopAttempt, or restarts it from
// intake / plan by throwing Restart (a checkpoint answer changed the intent).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qloom/agent/attempt.h"
#include "qloom/agent/checkpoint.h"
#include "qloom/agent/eval_phase.h"
#include "qloom/agent/fix_hypothesis.h"
#include "qloom/agent/intent.h"
#include "qloom/agent/resource_estimate.h"
#include "qloom/agent/workflow.h"
#include "qloom/agent/workspace.h"
#include "qloom/core/error.h"
#include "qloom/job/quantize_args.h"
#include "qloom/job/quantize_job.h"
#include "qloom/validate/report.h"

namespace qloom::agent::detail {

// Stops the attempt with an outcome (and, for the retry class, a fix).
struct StopAttempt {
  std::string outcome_id;
  std::string reason;
  std::optional<FixHypothesis> fix;
};

// Thrown by a checkpoint answer that changes the intent: restart from a phase.
struct Restart {
  std::string from;  // "intake" or "plan"
};

// Newlines and carriage returns -> spaces (one-line reasons).
std::string flatten_newlines(std::string s);
// e.what() on one line.
std::string error_text(const Error& e);
// Whether p is dir or inside it (absolute, normalized paths compared).
bool under(const std::filesystem::path& p, const std::filesystem::path& dir);

class AttemptRunner {
 public:
  AttemptRunner(const std::string& prompt, const RunOptions& opts, const Workspace& ws, int attempt,
                const std::optional<FixHypothesis>& fix);

  AttemptReport run();

 private:
  // attempt.cpp: the run loop, outcomes and checkpoints.
  template <class F>
  void timed(const char* phase, F&& f);
  void stop(const StopAttempt& s);
  void enter(const char* phase);
  void recovered(const std::string& id, const std::string& what);
  void ask_open_question(const std::string& field, const std::string& question, const char* restart_from);
  void apply_change(const std::string& text, const std::string& at);
  void decide(const std::string& id, const Answer& a);
  void write_session_context();
  void phase_pre();

  // attempt_intake.cpp
  void phase_intake();
  void intake_gguf(const std::filesystem::path& p);
  template <class Analyze>
  void finish_intake(Analyze analyze);
  void check_intake_compatibility();

  // attempt_plan.cpp
  void phase_plan();
  void apply_fix(nlohmann::ordered_json& plan, const FixHypothesis& f);
  static ResourceRequest resource_request(const nlohmann::json& plan);
  std::optional<uint64_t> memory_budget() const;
  void phase_manifest();
  bool may_replace_output(const std::filesystem::path& out);
  void write_manifest_checked(const nlohmann::json& estimates);
  void confirm_manifest(bool overwrite, const nlohmann::json& estimates);
  static std::string render_estimates(const nlohmann::json& e);

  // attempt_exec.cpp
  void phase_exec();
  void resolve_exec_source(const job::QuantizeOptions& o);
  void check_peak_memory(const job::QuantizeOptions& o);
  void run_quantize(const job::QuantizeOptions& o);
  StopAttempt exec_oom(const job::QuantizeOptions& o, const std::string& what);
  StopAttempt classify_exec_error(const Error& e, const job::QuantizeOptions& o);
  void fail_run(const Error& e);
  void fail_run_text(const std::string& error, int exit_status);
  void phase_export();
  void check_weights_present(const std::filesystem::path& q);
  void record_export(const std::filesystem::path& q);

  // attempt_validate.cpp
  void phase_validate();
  void run_validator_self_test();
  validate::ValidationReport validate_with_repairs();
  void record_validation(const validate::ValidationReport& rep);
  void check_step(const validate::StepResult& s);
  void check_numeric_step(const validate::StepResult& s);
  void note_skipped_step(const validate::StepResult& s);
  void confirm_result(const validate::ValidationReport& rep);
  validate::ValidationReport run_validator();
  void self_check();

  // attempt_eval.cpp
  void phase_eval();
  void check_eval_memory();
  EvalPhaseOptions eval_options() const;
  void stop_or_note_eval_skip(const EvalPhaseResult& r, const EvalPhaseOptions& eo);
  void record_eval(const EvalPhaseResult& r);

  const std::string& prompt_;
  const RunOptions& opts_;
  const Workspace& ws_;
  const std::optional<FixHypothesis>& fix_;
  std::ostream& log_;
  CheckpointIo cio_;
  AttemptReport report_;

  IntentContext ictx_;
  Intent intent_;
  std::vector<std::string> changes_;
  std::map<std::string, std::string> decisions_;
  std::filesystem::path config_dir_, source_dir_, quantized_dir_;
  std::filesystem::path gguf_path_;  // the model is this .gguf file (converted at exec)
  std::string model_source_, model_arg_;
  nlohmann::ordered_json environment_, analysis_, plan_, manifest_;
  job::QuantizeCommand cmd_;
  std::vector<std::string> recorded_args_;
  job::QuantizeSummary summary_;
  double exec_seconds_ = 0;
  std::optional<unsigned> fix_threads_;
  std::optional<double> fix_eval_budget_;
  bool fix_overwrite_ = false;
};

}  // namespace qloom::agent::detail
