// One attempt of the phase chain: the run loop, outcome recording,
// checkpoints and the pre phase. See attempt.h; the phases are in
// attempt_<phase>.cpp (attempt_runner.h).
#include "qloom/agent/attempt.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <new>
#include <system_error>

#include "qloom/agent/attempt_runner.h"
#include "qloom/agent/outcomes.h"
#include "qloom/build_info.h"

namespace qloom::agent {
namespace detail {
namespace fs = std::filesystem;

std::string flatten_newlines(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string error_text(const Error& e) {
  std::string s = e.what();
  return flatten_newlines(s);
}

bool under(const fs::path& p, const fs::path& dir) {
  if (p.empty() || dir.empty()) return false;
  const auto a = fs::absolute(p).lexically_normal().string();
  const auto d = fs::absolute(dir).lexically_normal().string();
  return a == d || a.rfind(d.back() == '/' ? d : d + "/", 0) == 0;
}

AttemptRunner::AttemptRunner(const std::string& prompt, const RunOptions& opts, const Workspace& ws, int attempt,
                             const std::optional<FixHypothesis>& fix)
    : prompt_(prompt), opts_(opts), ws_(ws), fix_(fix), log_(opts.log ? *opts.log : std::cerr) {
  report_.attempt = attempt;
  cio_.in = opts.in;
  cio_.out = &log_;
  cio_.interactive = resolve_interactive(opts.interactive, opts.stdin_is_tty) == Interactive::kOn;
}

template <class F>
void AttemptRunner::timed(const char* phase, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  auto record = [&] {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto& p : report_.phases)
      if (p.phase == phase) {
        p.seconds += s;
        return;
      }
    report_.phases.push_back({phase, s});
  };
  try {
    f();
  } catch (...) {
    record();
    throw;
  }
  record();
}

AttemptReport AttemptRunner::run() {
  try {
    timed("pre", [&] { phase_pre(); });
    std::string from = "intake";
    for (int restarts = 0;; ++restarts) {
      if (restarts > 20) throw StopAttempt{"checkpoint_aborted", "too many changes at the checkpoints (20)", {}};
      try {
        if (from == "intake") timed("intake", [&] { phase_intake(); });
        timed("plan", [&] { phase_plan(); });
        timed("manifest", [&] { phase_manifest(); });
        timed("exec", [&] { phase_exec(); });
        timed("export", [&] { phase_export(); });
        timed("validate", [&] { phase_validate(); });
        break;
      } catch (const Restart& r) {
        from = r.from;
      }
    }
    timed("eval", [&] { phase_eval(); });
    self_check();
  } catch (const StopAttempt& s) {
    stop(s);
  } catch (const std::bad_alloc&) {
    stop({ws_.last_phase() == "eval" ? "eval_oom" : "exec_oom", "out of memory in the " + ws_.last_phase() + " phase", {}});
  } catch (const Error& e) {
    // A qloom bug (kInternal) needs a change of qloom itself, not of the workspace.
    if (e.kind() == ErrorKind::kInternal)
      stop({"upstream_change_required", "a qloom bug in the " + ws_.last_phase() + " phase (report it): " + error_text(e), {}});
    else
      stop({"unclassified_failure", "in the " + ws_.last_phase() + " phase: " + error_text(e), {}});
  } catch (const std::exception& e) {
    stop({"unclassified_failure", "in the " + ws_.last_phase() + " phase: internal error: " + flatten_newlines(e.what()), {}});
  }
  return report_;
}

void AttemptRunner::stop(const StopAttempt& s) {
  report_.outcome_id = s.outcome_id;
  report_.reason = s.reason;
  try {
    ws_.write_blocked(s.outcome_id, s.reason);
    const OutcomeInfo* info = find_outcome(s.outcome_id);
    if (s.fix && info && info->cls == OutcomeClass::kRetry) {
      FixHypothesis f = *s.fix;
      f.attempt = report_.attempt + 1;
      ws_.write_text(fix_hypothesis_file_name(f.attempt), render_fix_hypothesis(f));
      report_.fix_written = true;
    }
  } catch (const Error& e) {
    report_.notes.push_back("could not record the outcome in the workspace: " + error_text(e));
  }
  log_ << "qloom run: attempt " << report_.attempt << " stopped: " << s.outcome_id << ": " << s.reason << "\n";
}

void AttemptRunner::enter(const char* phase) {
  ws_.set_phase(phase);
  if (opts_.on_phase) opts_.on_phase(phase, report_.attempt, ws_.dir(), quantized_dir_);
}

void AttemptRunner::recovered(const std::string& id, const std::string& what) {
  report_.recovered.push_back(id + ": " + what);
  log_ << "qloom run: auto-recover " << id << ": " << what << "\n";
}

// Asks an open question (interactive) or stops with checkpoint_aborted.
void AttemptRunner::ask_open_question(const std::string& field, const std::string& question, const char* restart_from) {
  if (!cio_.interactive)
    throw StopAttempt{"checkpoint_aborted", "open question (" + field + "): " + question +
                                                " Restate the request with the answer (interactive=off cannot ask).",
                      {}};
  const Answer a = run_checkpoint(cio_, restart_from, "a question", question, "Your answer?");
  if (a.kind != AnswerKind::kChange)
    throw StopAttempt{"checkpoint_aborted", "open question (" + field + ") not answered: " + question, {}};
  apply_change(a.text, restart_from);
}

void AttemptRunner::apply_change(const std::string& text, const std::string& at) {
  const Intent before = intent_;
  intent_ = apply_intent_change(intent_, text, ictx_);
  log_ << "[quark-checkpoint] change applied: \"" << text << "\"\n";
  changes_.push_back(at + ": " + text);
  write_session_context();
  const bool model_changed = before.model.value != intent_.model.value || before.model_path != intent_.model_path;
  throw Restart{model_changed || at == "intake" ? "intake" : "plan"};
}

void AttemptRunner::decide(const std::string& id, const Answer& a) {
  if (a.kind == AnswerKind::kYes) {
    decisions_[id] = cio_.interactive ? "accepted" : "auto-accepted";
    return;
  }
  if (a.kind == AnswerKind::kNo) {
    decisions_[id] = "declined";
    throw StopAttempt{"checkpoint_aborted", "the operator declined at the " + id + " checkpoint", {}};
  }
  decisions_[id] = "changed: " + a.text;
  apply_change(a.text, id == "intake" ? "intake" : "plan");
}

void AttemptRunner::write_session_context() {
  nlohmann::ordered_json j = to_json(intent_);
  j["workspace"] = fs::absolute(ws_.dir()).lexically_normal().string();
  j["attempt_number"] = report_.attempt;
  j["interactive"] = interactive_name(opts_.interactive);
  if (opts_.acceptable_eval_gap) j["acceptable_eval_gap"] = *opts_.acceptable_eval_gap;
  else j["acceptable_eval_gap"] = nullptr;  // resolved at eval: eval_gap_threshold.txt, then 0.03
  j["max_requantize_attempts"] = opts_.max_requantize_attempts;
  j["qloom_version"] = build::kVersion;
  ws_.write_json("session_context.json", j, "session_context");
}

// ---- pre ----
void AttemptRunner::phase_pre() {
  enter("pre");
  ictx_.demo_model_dir = bundled_demo_model().string();
  ictx_.output_root = fs::absolute(ws_.dir()).lexically_normal().string();
  if (opts_.model_root) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(*opts_.model_root, ec))
      if (e.is_directory()) ictx_.local_model_dirs.push_back(e.path().string());
    std::sort(ictx_.local_model_dirs.begin(), ictx_.local_model_dirs.end());
  }
  intent_ = parse_intent(prompt_, ictx_);
  if (intent_.quant_scheme.source == Source::kDefault && !intent_.quant_scheme.value.empty())
    recovered("intent_parse_failed", "the prompt names no scheme; the default " + intent_.quant_scheme.value +
                                         " is taken (" + intent_.reasons["quant_scheme"] + ")");
  if (intent_.output_dir.source == Source::kDefault)
    recovered("intent_parse_failed", "the prompt names no output directory; " + intent_.output_dir.value);
  write_session_context();
  // Seed 000 §5.4: the prompt's tolerance goes to eval_gap_threshold.txt before eval.
  if (intent_.eval_gap_threshold.value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g\n", *intent_.eval_gap_threshold.value);
    ws_.write_text("eval_gap_threshold.txt", buf);
  }
}

}  // namespace detail

AttemptReport run_attempt(const std::string& prompt, const RunOptions& opts, const Workspace& ws, int attempt,
                          const std::optional<FixHypothesis>& fix) {
  detail::AttemptRunner runner(prompt, opts, ws, attempt, fix);
  return runner.run();
}

}  // namespace qloom::agent
