// The attempt's validate phase: the validator's self-test, the validator
// with the repairs an auto-recover outcome allows (auxiliary files, config
// business fields), each failed step classified into an outcome, and
// checkpoint 4 (the verified result); plus the end-of-attempt self-check.
// See attempt_runner.h.
#include <stdlib.h>

#include <exception>
#include <string>
#include <system_error>

#include "qloom/agent/attempt_runner.h"
#include "qloom/agent/outcomes.h"
#include "qloom/agent/quantized_dir_repair.h"
#include "qloom/agent/run_manifest.h"
#include "qloom/core/format.h"
#include "qloom/validate/numeric_check.h"
#include "qloom/validate/self_test.h"
#include "qloom/validate/validator.h"

namespace qloom::agent::detail {
namespace fs = std::filesystem;

void AttemptRunner::phase_validate() {
  enter("validate");
  run_validator_self_test();
  const validate::ValidationReport rep = validate_with_repairs();
  if (!ws_.exists("validation_report.md")) {
    recovered("validation_report_absent", "validation_report.md missing after the validator ran; re-run once");
    validate::write_validation_report(rep, ws_.dir());
  }
  record_validation(rep);
  for (const auto& s : rep.steps) {
    check_step(s);
    note_skipped_step(s);
  }
  confirm_result(rep);
}

// The validator's self-test (seed 000 #13) runs on a generated model in a
// scratch directory under $TMPDIR.
void AttemptRunner::run_validator_self_test() {
  std::string tmpl;
  try {
    tmpl = (fs::temp_directory_path() / "qloom-validator-self-test-XXXXXX").string();
  } catch (const std::exception& e) {
    throw StopAttempt{"validator_self_test_failed", std::string("no scratch directory for the self-test: ") + flatten_newlines(e.what()), {}};
  }
  const char* dir = ::mkdtemp(tmpl.data());
  if (dir == nullptr)
    throw StopAttempt{"validator_self_test_failed", "cannot create a scratch directory for the self-test: " + tmpl, {}};
  bool ok = false;
  std::string why;
  try {
    ok = validate::run_validator_self_test(dir).passed();
    if (!ok) why = "the validator's self-test reported a failed check";
  } catch (const std::exception& e) {
    why = flatten_newlines(e.what());
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!ok) throw StopAttempt{"validator_self_test_failed", why, {}};
}

// The validator, re-run (at most twice) after repairing what a failed step
// 1 (auxiliary files) or step 3 (config business fields) names.
validate::ValidationReport AttemptRunner::validate_with_repairs() {
  validate::ValidationReport rep;
  for (int round = 0;; ++round) {
    rep = run_validator();
    if (round >= 2) break;
    bool fixed = false;
    for (const auto& s : rep.steps) {
      if (s.status != validate::StepResult::Status::kFail) continue;
      if (s.number == 1)
        for (const auto& r : repair_auxiliary(source_dir_, quantized_dir_)) {
          recovered("should_have_aux_missing", r);
          fixed = true;
        }
      if (s.number == 3)
        for (const auto& r : repair_config_mismatch(source_dir_, quantized_dir_)) {
          recovered("must_validate_config_mismatch", r);
          fixed = true;
        }
    }
    if (!fixed) break;
  }
  return rep;
}

void AttemptRunner::record_validation(const validate::ValidationReport& rep) {
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const auto& s : rep.steps)
    steps.push_back({{"step", s.number}, {"title", s.title}, {"status", validate::status_name(s.status)},
                     {"summary", s.summary}});
  report_.validation = {{"passed", rep.passed()}, {"steps", steps}};
}

// A failed step stops the attempt with its outcome (and, where a fresh
// export may help, the retry's fix).
void AttemptRunner::check_step(const validate::StepResult& s) {
  if (s.status != validate::StepResult::Status::kFail) return;
  if (s.number == 4) {
    FixHypothesis f;
    f.root_cause = "Validator step 4 found tensor-name patterns that differ from the source: " + flatten_newlines(s.summary);
    f.actions = {"re-export from scratch with --overwrite (same plan)"};
    f.risk = "a systematic naming bug in the exporter fails the same way; then it is an upstream change";
    f.plan_overrides = {{"overwrite_output", true}};
    throw StopAttempt{"fuzzy_check_failed", "validation step 4 FAIL: " + flatten_newlines(s.summary), f};
  }
  if (s.number == 2)
    throw StopAttempt{"must_validate_md5_mismatch", "validation step 2 FAIL: " + flatten_newlines(s.summary), {}};
  if (s.number == 3) {
    // The repair (source business fields + quantization_config) did not
    // make step 3 pass, e.g. quantization_config itself is gone: only a
    // fresh export restores it (seed §8 #30: a fix inside the workspace).
    FixHypothesis f;
    f.root_cause = "config.json of the export still differs from the source after the repair: " + flatten_newlines(s.summary);
    f.actions = {"re-export from scratch with --overwrite (same plan), which rewrites config.json with its quantization_config"};
    f.risk = "if the exporter itself writes a wrong config the retry fails the same way";
    f.plan_overrides = {{"overwrite_output", true}};
    throw StopAttempt{"unclassified_failure", "validation step 3 still FAIL after the auto-recover fix: " + flatten_newlines(s.summary), f};
  }
  if (s.number == 1)
    throw StopAttempt{"should_have_aux_missing", "validation step 1 still FAIL after repair: " + flatten_newlines(s.summary), {}};
  if (s.number == 5) check_numeric_step(s);
  // Step 6: vLLM's Quark loader would refuse (or misload) the export (the
  // agent validates with target vLLM: run_validator).
  if (s.number == 6)
    throw StopAttempt{"quantized_load_failed", "validation step 6 FAIL: " + flatten_newlines(s.summary), {}};
}

// A failed step 5 (dequantized weights, engine load): which outcome.
void AttemptRunner::check_numeric_step(const validate::StepResult& s) {
  const std::string t = flatten_newlines(s.summary);
  // qloom's engine lacks a feature the model needs (e.g. a RoPE type):
  // the checkpoint may be fine; only a change of qloom lets it verify.
  if (s.data.value("engine_error_kind", "") == "unsupported")
    throw StopAttempt{"upstream_change_required",
                      "validation step 5: qloom's engine cannot run this model, so the export cannot be verified "
                      "numerically; it needs a qloom change: " + t,
                      {}};
  // The engine part of step 5 failed (load error or non-finite logits):
  // the model cannot serve; otherwise dequantized weights are off.
  if (t.find("engine: FAIL") != std::string::npos || t.find("non-finite logits") != std::string::npos)
    throw StopAttempt{"quantized_load_failed", "validation step 5 FAIL: the quantized model does not load: " + t, {}};
  throw StopAttempt{"unclassified_failure", "validation step 5 FAIL: " + t, {}};
}

// A skipped step is an auto-recover outcome; a skipped nice-to-have step is
// also noted in validation_report.md.
void AttemptRunner::note_skipped_step(const validate::StepResult& s) {
  if (s.status != validate::StepResult::Status::kSkipped) return;
  if (s.number == 4 || s.number == 2 || s.number == 3)
    recovered("must_validate_skipped", "step " + std::to_string(s.number) + " skipped: " + flatten_newlines(s.summary));
  if (s.number == 1 || s.number == 5 || s.number == 6) {
    recovered("nice_to_have_skipped", "step " + std::to_string(s.number) + " skipped: " + flatten_newlines(s.summary));
    auto text = ws_.read_text("validation_report.md").value_or("");
    text += "\n## Notes\n- step " + std::to_string(s.number) + " skipped: " + flatten_newlines(s.summary) + "\n";
    ws_.write_text("validation_report.md", text);
  }
}

// Checkpoint 4 (seed 003): the verified result.
void AttemptRunner::confirm_result(const validate::ValidationReport& rep) {
  std::string facts = "output: " + quantized_dir_.string() + "\n";
  if (report_.model.is_object())
    facts += "size: " + format_bytes(report_.model.value("output_bytes", uint64_t(0))) + " (weights " +
             format_bytes(summary_.bytes_before) + " -> " + format_bytes(summary_.bytes_after) + ")\n";
  for (const auto& s : rep.steps)
    facts += "validation step " + std::to_string(s.number) + " (" + s.title + "): " + validate::status_name(s.status) + "\n";
  const Answer a = run_checkpoint(cio_, "result", "verified result", facts, "Accept this result?");
  decide("result", a);
  set_checkpoint_decision(manifest_, "result", decisions_["result"]);
  write_run_manifest(ws_.dir(), manifest_);
}

// The agent's deployment target is vLLM (seed 000: its eval backend, and
// #28 quantized_load_failed when the serving engine cannot load the model;
// the intent names no other engine): step 6 decides the verdict.
validate::ValidationReport AttemptRunner::run_validator() {
  validate::ValidateOptions vo;
  vo.threads = opts_.threads;
  vo.target = validate::DeployTarget::kVllm;
  if (opts_.numeric_validation) vo.numeric_step = validate::check_dequantized_weights;
  auto rep = validate::validate_checkpoint(source_dir_, quantized_dir_, vo);
  validate::write_validation_report(rep, ws_.dir());
  return rep;
}

// Seed 000 §10: before the attempt ends, every MUST-have is checked the way
// the runner's classifier reads it; what an auto-recover fix can restore
// (an artifact, the quantized dir's config / tokenizer, the validation
// report) is restored and checked again.
void AttemptRunner::self_check() {
  for (int round = 0; round < 4; ++round) {
    const auto c = classify_workspace(ws_.dir(), opts_.acceptable_eval_gap);
    if (!c.outcome) return;
    const std::string id(c.outcome->id);
    const std::string why = " (self-check: " + c.reason + ")";
    if (id == "analysis_artifact_invalid_or_missing") {
      ws_.write_json("model_analysis.json", analysis_, "model_analysis");
      recovered(id, "model_analysis.json rewritten from the intake" + why);
    } else if (id == "plan_artifact_invalid_or_missing") {
      ws_.write_json("quant_plan.json", plan_, "quant_plan");
      recovered(id, "quant_plan.json rewritten from the confirmed plan" + why);
    } else if (id == "manifest_artifact_invalid_or_missing") {
      write_run_manifest(ws_.dir(), manifest_);
      recovered(id, "run_manifest.yaml rewritten (same command, observed status)" + why);
    } else if (id == "must_have_config_missing_or_invalid") {
      for (const auto& r : repair_config(source_dir_, quantized_dir_)) recovered(id, r + why);
      run_validator();
    } else if (id == "must_have_tokenizer_missing") {
      for (const auto& r : repair_tokenizer(source_dir_, quantized_dir_)) recovered(id, r + why);
      run_validator();
    } else if (id == "validation_report_absent") {
      run_validator();
      recovered(id, "validator re-run once" + why);
    } else {
      return;  // not an artifact the attempt can restore: the runner reports it
    }
  }
}

}  // namespace qloom::agent::detail
